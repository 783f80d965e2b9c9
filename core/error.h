// trit::Error: the one exception type library code throws for anything a user can get wrong
// (recipe, file, flag, shape). Messages say what, where, what was expected. Only main() turns
// an Error into an exit code.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace trit {

class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

namespace detail {
template <typename... Args>
std::string concat(Args&&... args) {
    std::ostringstream os;
    (os << ... << std::forward<Args>(args));
    return os.str();
}
}  // namespace detail

}  // namespace trit

// Throws trit::Error with the streamed arguments as message when `cond` is false.
#define TRIT_CHECK(cond, ...)                                          \
    do {                                                               \
        if (!(cond)) throw ::trit::Error(::trit::detail::concat(__VA_ARGS__)); \
    } while (0)

#define TRIT_FAIL(...) throw ::trit::Error(::trit::detail::concat(__VA_ARGS__))
