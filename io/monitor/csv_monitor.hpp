#pragma once
/// DeepSpeed's csv_monitor layout: one CSV file per tag, rows "step,value".

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "io/monitor/scalar_log.hpp"

namespace troupe::io {

/// As deepspeed/monitor/csv_monitor.py writes them: DIRECTORY/<tag with '/' and ' ' as '_'>.csv,
/// a header row "step,<last part of the tag>", then one "step,value" row per scalar.
class csv_monitor final : public scalar_log {
 public:
  explicit csv_monitor(std::filesystem::path directory);
  void scalar(const std::string& tag, int64_t step, double value, double wall_time) override;
  void flush() override;

 private:
  std::filesystem::path directory_;
  std::map<std::string, std::ofstream> files_;  ///< by tag
};

}  // namespace troupe::io
