#include "cluster/slurm_allocation.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "messages/error.hpp"

namespace troupe::cluster {
namespace {

/// The items of a comma-separated list, split only outside brackets; empty items dropped.
std::vector<std::string> top_level_items(const std::string& text) {
  std::vector<std::string> items;
  std::string item;
  int depth = 0;
  for (char c : text) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      if (!item.empty()) items.push_back(item);
      item.clear();
    } else {
      item += c;
    }
  }
  if (!item.empty()) items.push_back(item);
  return items;
}

bool all_digits(const std::string& text) {
  return !text.empty() && text.size() <= 18 &&
         std::all_of(text.begin(), text.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

/// "01-03,7" → {"01", "02", "03", "7"}: a range is as wide as its first number.
std::vector<std::string> expand_group(const std::string& group, const std::string& flaw_prefix) {
  std::vector<std::string> numbers;
  for (const auto& part : top_level_items(group)) {
    const auto dash = part.find('-');
    const auto first = part.substr(0, dash);
    const auto last = dash == std::string::npos ? first : part.substr(dash + 1);
    if (!all_digits(first) || !all_digits(last))
      throw make_error(flaw_prefix, "\"", part, "\" is not a number or a range of numbers (like 01-04)");
    const long long from = std::stoll(first), to = std::stoll(last);
    if (to < from) throw make_error(flaw_prefix, "the range \"", part, "\" runs backwards");
    if (to - from >= 100000) throw make_error(flaw_prefix, "the range \"", part, "\" has over 100000 hosts");
    for (long long n = from; n <= to; ++n) {
      auto digits = std::to_string(n);
      if (digits.size() < first.size()) digits.insert(0, first.size() - digits.size(), '0');
      numbers.push_back(digits);
    }
  }
  if (numbers.empty()) throw make_error(flaw_prefix, "an empty bracket");
  return numbers;
}

/// One item: literal text and bracket groups, multiplied out (the first group varies slowest).
std::vector<std::string> expand_item(const std::string& item, const std::string& flaw_prefix) {
  std::vector<std::string> names = {""};
  std::size_t at = 0;
  bool after_group = false;
  while (at < item.size()) {
    const auto open = item.find('[', at);
    const auto literal = item.substr(at, open == std::string::npos ? std::string::npos : open - at);
    if (literal.find(']') != std::string::npos) throw make_error(flaw_prefix, "a ']' without its '['");
    if (open == std::string::npos && after_group)
      throw make_error(flaw_prefix, "text after the last bracket (\"", literal, "\"), which Slurm does not accept");
    for (auto& name : names) name += literal;
    if (open == std::string::npos) break;
    const auto close = item.find(']', open);
    if (close == std::string::npos) throw make_error(flaw_prefix, "a '[' without its ']'");
    const auto numbers = expand_group(item.substr(open + 1, close - open - 1), flaw_prefix);
    std::vector<std::string> longer;
    for (const auto& name : names)
      for (const auto& number : numbers) longer.push_back(name + number);
    names = std::move(longer);
    at = close + 1;
    after_group = true;
  }
  return names;
}

const char* required(const environment_reader& environment, const char* name, const char* why) {
  const char* value = environment(name);
  if (value == nullptr || *value == '\0')
    throw make_error("Slurm: ", name, " is not set (", why, "); run inside an allocation (sbatch, salloc) or without --slurm");
  return value;
}

int64_t count_of(const std::string& text, const std::string& what) {
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || end == nullptr || *end != '\0' || value < 0)
    throw make_error(what, ": expected a count, got \"", text, "\"");
  return value;
}

}  // namespace

std::vector<std::string> expand_hostlist(const std::string& expression, const std::string& what) {
  const std::string flaw_prefix = what + "=\"" + expression + "\": expected a Slurm hostlist (like n[01-04],gpu7); ";
  std::vector<std::string> hosts;
  for (const auto& item : top_level_items(expression))
    for (auto& host : expand_item(item, flaw_prefix)) hosts.push_back(std::move(host));
  if (hosts.empty()) throw make_error(flaw_prefix, "it names no host");
  return hosts;
}

std::vector<int64_t> expand_tasks_per_node(const std::string& expression, const std::string& what) {
  std::vector<int64_t> tasks;
  for (const auto& item : top_level_items(expression)) {
    const auto open = item.find("(x");
    const auto count = count_of(item.substr(0, open), what);
    int64_t repeat = 1;
    if (open != std::string::npos) {
      if (item.back() != ')') throw make_error(what, "=\"", expression, "\": expected N or N(xM) items, got \"", item, "\"");
      repeat = count_of(item.substr(open + 2, item.size() - open - 3), what);
    }
    tasks.insert(tasks.end(), static_cast<std::size_t>(repeat), count);
  }
  if (tasks.empty()) throw make_error(what, "=\"", expression, "\": expected task counts like 2(x3),1");
  return tasks;
}

const char* process_environment(const char* name) { return std::getenv(name); }

bool inside_slurm_job(const environment_reader& environment) {
  const char* id = environment("SLURM_JOB_ID");
  return id != nullptr && *id != '\0';
}

slurm_allocation read_slurm_allocation(const environment_reader& environment) {
  slurm_allocation allocation;
  allocation.job_id = required(environment, "SLURM_JOB_ID", "the job");
  allocation.hosts = expand_hostlist(required(environment, "SLURM_JOB_NODELIST", "the allocated nodes"),
                                     "SLURM_JOB_NODELIST");
  const auto nodes = count_of(required(environment, "SLURM_JOB_NUM_NODES", "how many nodes"), "SLURM_JOB_NUM_NODES");
  if (nodes != static_cast<int64_t>(allocation.hosts.size()))
    throw make_error("Slurm: SLURM_JOB_NUM_NODES=", nodes, " but SLURM_JOB_NODELIST names ", allocation.hosts.size(),
                     " nodes");
  allocation.tasks = expand_tasks_per_node(required(environment, "SLURM_TASKS_PER_NODE", "the workers of each node"),
                                           "SLURM_TASKS_PER_NODE");
  if (allocation.tasks.size() != allocation.hosts.size())
    throw make_error("Slurm: SLURM_TASKS_PER_NODE gives ", allocation.tasks.size(), " nodes, SLURM_JOB_NODELIST ",
                     allocation.hosts.size());
  int64_t total = 0;
  for (const auto t : allocation.tasks) {
    if (t < 1) throw make_error("Slurm: SLURM_TASKS_PER_NODE: every node needs at least one task (a worker)");
    total += t;
  }
  if (const char* ntasks = environment("SLURM_NTASKS"); ntasks != nullptr && count_of(ntasks, "SLURM_NTASKS") != total)
    throw make_error("Slurm: SLURM_NTASKS=", ntasks, " but SLURM_TASKS_PER_NODE adds up to ", total);
  if (const char* restarts = environment("SLURM_RESTART_COUNT"); restarts != nullptr)
    allocation.restart_count = count_of(restarts, "SLURM_RESTART_COUNT");
  if (const char* node = environment("SLURMD_NODENAME"); node != nullptr) allocation.launcher_host = node;
  return allocation;
}

std::size_t slurm_head_index(const slurm_allocation& allocation, bool failover) {
  if (!failover) return 0;
  for (std::size_t i = 0; i < allocation.hosts.size(); ++i)
    if (allocation.hosts[i] != allocation.launcher_host) return i;
  return 0;
}

}  // namespace troupe::cluster
