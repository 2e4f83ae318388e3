#pragma once
/// Checking what a troupe::error says: the one helper every test file uses for that.

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "messages/error.hpp"

namespace troupe::testing {

/// The message of the troupe::error `action` throws, or "" when it throws none.
inline std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const troupe::error& e) {
    return e.what();
  }
  return "";
}

/// Expects `action` to throw a troupe::error whose message contains `fragment`.
inline void expect_error(const std::function<void()>& action, const std::string& fragment) {
  try {
    action();
    ADD_FAILURE() << "accepted; expected an error containing '" << fragment << "'";
  } catch (const troupe::error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << "'" << fragment << "' not in: " << e.what();
  }
}

}  // namespace troupe::testing
