#include "cluster/job_secret.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "cluster/plan.hpp"
#include "io/os/file_util.hpp"
#include "messages/error.hpp"

namespace troupe::cluster {

std::string make_job_secret() {
  std::random_device device;  // the OS's entropy source (getrandom) on Linux
  std::string secret;
  for (int i = 0; i < 4; ++i) {
    char part[9];
    std::snprintf(part, sizeof part, "%08x", static_cast<unsigned>(device()));
    secret += part;
  }
  return secret;
}

std::filesystem::path job_secret_file(const std::filesystem::path& run_dir) { return run_dir / "job-secret"; }

published_job_secret::published_job_secret(const std::filesystem::path& run_dir, const std::string& secret)
    : file_(job_secret_file(run_dir)) {
  std::filesystem::remove(file_);
  const int fd = ::open(file_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throw make_error(file_.string(), ": cannot create: ", std::strerror(errno));
  const std::string text = secret + "\n";
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  if (!written) throw make_error(file_.string(), ": cannot write the job secret");
}

published_job_secret::~published_job_secret() {
  std::error_code ignored;
  std::filesystem::remove(file_, ignored);
}

void adopt_published_job_secret(const std::filesystem::path& run_dir) {
  if (std::getenv(job_secret_variable) != nullptr) return;
  const auto file = job_secret_file(run_dir);
  if (!std::filesystem::exists(file)) return;
  auto secret = io::read_whole_file(file);
  while (!secret.empty() && secret.back() == '\n') secret.pop_back();
  ::setenv(job_secret_variable, secret.c_str(), 1);
}

bool same_job_secret(const std::string& given, const std::string& expected) {
  if (expected.empty()) return true;
  unsigned char difference = given.size() == expected.size() ? 0 : 1;
  for (std::size_t i = 0; i < expected.size(); ++i)
    difference |= static_cast<unsigned char>(expected[i] ^ (i < given.size() ? given[i] : 0));
  return difference == 0;
}

}  // namespace troupe::cluster
