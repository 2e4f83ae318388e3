#include "io/monitor/csv_monitor.hpp"

#include <cstdio>
#include <stdexcept>

namespace troupe::io {

csv_monitor::csv_monitor(std::filesystem::path directory) : directory_(std::move(directory)) {
  std::filesystem::create_directories(directory_);
}

void csv_monitor::scalar(const std::string& tag, int64_t step, double value, double) {
  auto found = files_.find(tag);
  if (found == files_.end()) {
    std::string name = tag;
    for (auto& c : name)
      if (c == '/' || c == ' ') c = '_';
    const auto path = directory_ / (name + ".csv");
    const bool fresh = !std::filesystem::exists(path);
    std::ofstream file(path, std::ios::app);
    if (!file) throw std::runtime_error("cannot write the csv_monitor file " + path.string());
    if (fresh) file << "step," << tag.substr(tag.rfind('/') + 1) << '\n';
    found = files_.emplace(tag, std::move(file)).first;
  }
  char text[64];
  std::snprintf(text, sizeof text, "%.9g", value);
  found->second << step << ',' << text << '\n';
}

void csv_monitor::flush() {
  for (auto& [tag, file] : files_) file.flush();
}

}  // namespace troupe::io
