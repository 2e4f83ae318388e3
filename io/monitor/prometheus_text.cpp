#include "io/monitor/prometheus_text.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace troupe::io {
namespace {

bool valid_name(const std::string& name, bool label) {
  if (name.empty()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (!label && c == ':');
    if (!letter && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

// Label values escape backslash, double quote and line feed; HELP text backslash and line feed.
std::string escaped(const std::string& text, bool quotes) {
  std::string out;
  for (const char c : text) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (c == '"' && quotes)
      out += "\\\"";
    else
      out += c;
  }
  return out;
}

}  // namespace

std::string prometheus_number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char text[32];
  for (int precision = 6; precision <= 17; ++precision) {  // the shortest text that reads back exactly
    std::snprintf(text, sizeof text, "%.*g", precision, value);
    if (std::strtod(text, nullptr) == value) break;
  }
  return text;
}

const char* prometheus_content_type() { return "text/plain; version=0.0.4; charset=utf-8"; }

void prometheus_text::family(const std::string& name, const std::string& type, const std::string& help) {
  if (!valid_name(name, false)) throw std::invalid_argument("not a Prometheus metric name: " + name);
  if (std::find(families_.begin(), families_.end(), name) != families_.end())
    throw std::invalid_argument("Prometheus metric family given twice: " + name);
  families_.push_back(name);
  current_ = name;
  text_ += "# HELP " + name + " " + escaped(help, false) + "\n";
  text_ += "# TYPE " + name + " " + type + "\n";
}

void prometheus_text::sample(const prometheus_labels& labels, double value, const std::string& suffix) {
  if (current_.empty()) throw std::invalid_argument("Prometheus sample before its family");
  text_ += current_ + suffix;
  if (!labels.empty()) {
    text_ += '{';
    for (std::size_t i = 0; i < labels.size(); ++i) {
      if (!valid_name(labels[i].first, true)) throw std::invalid_argument("not a Prometheus label name: " + labels[i].first);
      if (i) text_ += ',';
      text_ += labels[i].first + "=\"" + escaped(labels[i].second, true) + '"';
    }
    text_ += '}';
  }
  text_ += ' ' + prometheus_number(value) + '\n';
}

void prometheus_text::histogram(const prometheus_labels& labels, const std::vector<double>& upper_bounds,
                                const std::vector<double>& cumulative_counts, double sum, double count) {
  for (std::size_t i = 0; i < upper_bounds.size(); ++i) {
    auto with_bound = labels;
    with_bound.emplace_back("le", prometheus_number(upper_bounds[i]));
    sample(with_bound, cumulative_counts[i], "_bucket");
  }
  auto infinite = labels;
  infinite.emplace_back("le", "+Inf");
  sample(infinite, count, "_bucket");
  sample(labels, sum, "_sum");
  sample(labels, count, "_count");
}

}  // namespace troupe::io
