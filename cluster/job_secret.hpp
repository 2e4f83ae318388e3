#pragma once
/// The job secret: a random token the launcher makes for each job, which every join must
/// carry (the coordinator refuses others). Local nodes inherit it in job_secret_variable; ssh
/// nodes read it from stdin; a node started by hand with `troupe node --join` reads
/// RUN_DIR/job-secret, which the launcher writes (0600) and removes when it ends. Never on a
/// command line, where ps would show it.

#include <filesystem>
#include <string>

namespace troupe::cluster {

/// A new random job secret: 32 hex digits from the OS.
std::string make_job_secret();

/// Whether `given` is the job's secret (`expected` empty: any is), compared in a time that does
/// not depend on where they differ.
bool same_job_secret(const std::string& given, const std::string& expected);

/// RUN_DIR/job-secret.
std::filesystem::path job_secret_file(const std::filesystem::path& run_dir);

/// The launcher's copy of the secret in RUN_DIR/job-secret, readable by this user only from
/// its creation, removed when this object goes.
class published_job_secret {
 public:
  published_job_secret(const std::filesystem::path& run_dir, const std::string& secret);
  ~published_job_secret();
  published_job_secret(const published_job_secret&) = delete;
  published_job_secret& operator=(const published_job_secret&) = delete;

 private:
  std::filesystem::path file_;
};

/// For a node started by hand: job_secret_variable from RUN_DIR/job-secret when the
/// environment does not already carry it (and the file exists).
void adopt_published_job_secret(const std::filesystem::path& run_dir);

}  // namespace troupe::cluster
