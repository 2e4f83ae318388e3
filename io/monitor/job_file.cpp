#include "io/monitor/job_file.hpp"

#include "io/os/file_util.hpp"
#include "messages/error.hpp"

namespace troupe::io {

void write_job_file(const std::filesystem::path& file, const job_description& job) {
  std::filesystem::create_directories(file.parent_path());
  write_file_atomically(file, nlohmann::json{{"name", job.name},
                                             {"run_dir", job.run_dir},
                                             {"total_steps", job.total_steps},
                                             {"world_size", job.world_size},
                                             {"started_unix_s", job.started_unix_seconds},
                                             {"config", job.config}}
                                  .dump(2));
}

job_description read_job_file(const std::filesystem::path& file) {
  job_description job;
  const auto text = read_whole_file(file);
  try {
    const auto j = nlohmann::json::parse(text);
    job.name = j.value("name", std::string());
    job.run_dir = j.value("run_dir", std::string());
    job.total_steps = j.value("total_steps", int64_t{0});
    job.world_size = j.value("world_size", int64_t{1});
    job.started_unix_seconds = j.value("started_unix_s", 0.0);
    job.config = j.value("config", nlohmann::json::object());
  } catch (const nlohmann::json::exception& e) {
    throw make_error(file.string(), ": not the job description a metrics hub writes: ", e.what());
  }
  return job;
}

}  // namespace troupe::io
