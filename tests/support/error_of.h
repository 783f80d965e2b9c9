// Test helper: the message of the trit::Error a callable throws.
#pragma once

#include <functional>
#include <string>

#include "core/error.h"

namespace trit::testing {

// The trit::Error message of `f`, or "" when it does not throw.
inline std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

}  // namespace trit::testing
