/// @file text.hpp
/// @brief Text for messages: "did you mean" suggestions, and names from
///        files made safe to print.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ukb {

/// The candidate closest to `word` by edit distance if it is close enough to
/// be a likely typo, else an empty string (for "did you mean" messages).
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

/// `text` safe to print in a message: control characters (C0, DEL, C1)
/// escaped as \xNN, so that a name from a file cannot drive the terminal;
/// newlines and tabs kept where `keep_newlines`; at most `max_bytes` bytes of
/// the text (0: all), then "... (N bytes)".
std::string printable(std::string_view text, std::size_t max_bytes = 0, bool keep_newlines = false);

}  // namespace ukb
