// Text for messages: "did you mean" suggestions and names made safe to print.
#include "ukb/text.hpp"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace ukb {
namespace {

// Optimal string alignment distance: insertions, deletions, substitutions
// and transpositions of neighbours each cost 1.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  const std::size_t w = b.size() + 1;
  std::vector<std::size_t> d((a.size() + 1) * w);
  for (std::size_t i = 0; i <= a.size(); ++i) d[i * w] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      std::size_t v = std::min({d[(i - 1) * w + j] + 1, d[i * w + j - 1] + 1,
                                d[(i - 1) * w + j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        v = std::min(v, d[(i - 2) * w + j - 2] + 1);
      d[i * w + j] = v;
    }
  }
  return d[a.size() * w + b.size()];
}

}  // namespace

std::string closest_match(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_d = std::string::npos;
  for (const std::string& c : candidates) {
    // The distance is at least the difference in length: a word that much
    // longer (or shorter) is no typo of c, and its distance is not computed
    // (a 50 MB name costs nothing).
    const std::size_t longer = std::max(word.size(), c.size()), shorter = std::min(word.size(), c.size());
    if (longer - shorter > std::max<std::size_t>(1, longer / 3)) continue;
    const std::size_t d = edit_distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  // A likely typo: at most a third of the longer word changed (at least 1).
  const std::size_t limit = std::max<std::size_t>(1, std::max(word.size(), best.size()) / 3);
  return best_d <= limit ? best : std::string();
}

std::string printable(std::string_view text, std::size_t max_bytes, bool keep_newlines) {
  std::string out;
  const std::size_t n = max_bytes > 0 && text.size() > max_bytes ? max_bytes : text.size();
  out.reserve(n + 16);
  char hex[8];
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    const bool newline = keep_newlines && (c == '\n' || c == '\t');
    // C0 controls, DEL, and the C1 controls in UTF-8 (0xC2 0x80-0x9F), which
    // terminals also act on.
    const bool c1 = c == 0xC2 && i + 1 < text.size() && (static_cast<unsigned char>(text[i + 1]) & 0xE0) == 0x80;
    if ((c < 0x20 && !newline) || c == 0x7F || c1) {
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
      if (c1) {
        std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned char>(text[++i]));
        out += hex;
      }
    } else {
      out += static_cast<char>(c);
    }
  }
  if (n < text.size()) {
    // Not in the middle of a UTF-8 character.
    while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80) out.pop_back();
    if (!out.empty() && static_cast<unsigned char>(out.back()) >= 0xC0) out.pop_back();
    out += "... (" + std::to_string(text.size()) + " bytes)";
  }
  return out;
}

}  // namespace ukb
