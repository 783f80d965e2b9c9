// Test helpers: the message of the trit::Error a callable throws, and a check of its parts.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
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

// Runs f and expects a trit::Error whose message contains every one of `parts`.
template <typename F>
void expect_error(F&& f, std::initializer_list<std::string> parts) {
    try {
        f();
    } catch (const Error& e) {
        for (const std::string& p : parts) EXPECT_THAT(e.what(), ::testing::HasSubstr(p));
        return;
    }
    ADD_FAILURE() << "expected a trit::Error containing " << *parts.begin();
}

}  // namespace trit::testing
