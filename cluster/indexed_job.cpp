#include "cluster/indexed_job.hpp"

#include <cstdlib>

#include "cluster/manifest.hpp"
#include "messages/error.hpp"

namespace troupe::cluster {
namespace {

const char* value_of(const environment_reader& environment, const char* name) {
  const char* value = environment(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

int64_t number_of(const char* name, const char* text, int64_t low, int64_t high) {
  char* end = nullptr;
  const long long value = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || value < low || value > high)
    throw make_error("--from-env: ", name, "=\"", text, "\": expected a whole number in ", low, "..", high);
  return value;
}

std::vector<std::string> hosts_of(const environment_reader& environment, std::string& described) {
  std::vector<std::string> hosts;
  if (const char* list = value_of(environment, "TROUPE_HOSTS")) {
    std::string text = list, host;
    for (std::size_t at = 0; at <= text.size(); ++at) {
      if (at < text.size() && text[at] != ',') {
        host += text[at];
        continue;
      }
      if (!is_valid_host(host))
        throw make_error("--from-env: TROUPE_HOSTS=\"", text, "\": \"", host, "\" is not a host name or address");
      hosts.push_back(host);
      host.clear();
    }
    described = "TROUPE_HOSTS=" + text;
    return hosts;
  }
  const char* count = value_of(environment, "TROUPE_NODES");
  const char* pattern = value_of(environment, "TROUPE_HOST_TEMPLATE");
  if (count == nullptr || pattern == nullptr)
    throw error("--from-env: set TROUPE_HOSTS (every node's host, comma-separated), or TROUPE_NODES and "
                "TROUPE_HOST_TEMPLATE (a host name with {index}, e.g. \"troupe-{index}.troupe\" for a Kubernetes "
                "Indexed Job with a headless Service)");
  const std::string template_text = pattern;
  const auto slot = template_text.find("{index}");
  if (slot == std::string::npos)
    throw make_error("--from-env: TROUPE_HOST_TEMPLATE=\"", template_text, "\": expected \"{index}\" in it");
  const auto nodes = number_of("TROUPE_NODES", count, 1, 100000);
  for (int64_t i = 0; i < nodes; ++i) {
    auto host = template_text;
    host.replace(slot, 7, std::to_string(i));
    if (!is_valid_host(host))
      throw make_error("--from-env: TROUPE_HOST_TEMPLATE=\"", template_text, "\" makes \"", host,
                       "\", not a host name");
    hosts.push_back(host);
  }
  described = "TROUPE_NODES=" + std::string(count) + " TROUPE_HOST_TEMPLATE=" + template_text;
  return hosts;
}

}  // namespace

indexed_job read_indexed_job(const environment_reader& environment) {
  indexed_job job;
  job.hosts = hosts_of(environment, job.described);
  const int64_t last = static_cast<int64_t>(job.hosts.size()) - 1;
  if (const char* index = value_of(environment, "JOB_COMPLETION_INDEX"))
    job.index = number_of("JOB_COMPLETION_INDEX", index, 0, last);
  else if (const char* own = value_of(environment, "TROUPE_NODE_INDEX"))
    job.index = number_of("TROUPE_NODE_INDEX", own, 0, last);
  else
    throw error("--from-env: neither JOB_COMPLETION_INDEX (set by a Kubernetes Indexed Job) nor TROUPE_NODE_INDEX "
                "is set: which node is this?");
  if (const char* workers = value_of(environment, "TROUPE_WORKERS_PER_NODE"))
    job.workers_per_node = number_of("TROUPE_WORKERS_PER_NODE", workers, 1, 4096);
  if (const char* port = value_of(environment, "TROUPE_HEAD_PORT"))
    job.head_port = number_of("TROUPE_HEAD_PORT", port, 1, 65535);
  job.described += " TROUPE_WORKERS_PER_NODE=" + std::to_string(job.workers_per_node) +
                   (job.head_port > 0 ? " TROUPE_HEAD_PORT=" + std::to_string(job.head_port) : "");
  return job;
}

}  // namespace troupe::cluster
