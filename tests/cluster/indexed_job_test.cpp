// A node of an indexed job (a Kubernetes Indexed Job) read from the environment: the index, the
// hosts from a list or a template, and errors that name the variable.
#include "cluster/indexed_job.hpp"

#include <gtest/gtest.h>

#include <map>

#include "cluster/manifest.hpp"
#include "messages/error.hpp"

namespace troupe::cluster {
namespace {

struct environment {
  std::map<std::string, std::string> values;
  environment_reader reader() const {
    return [this](const char* name) -> const char* {
      const auto found = values.find(name);
      return found == values.end() ? nullptr : found->second.c_str();
    };
  }
};

std::string error_of(const environment& env) {
  try {
    read_indexed_job(env.reader());
  } catch (const troupe::error& e) {
    return e.what();
  }
  return "";
}

TEST(IndexedJob, KubernetesIndexAndHostTemplate) {
  const environment env{{{"JOB_COMPLETION_INDEX", "2"},
                         {"TROUPE_NODES", "3"},
                         {"TROUPE_HOST_TEMPLATE", "troupe-{index}.troupe"},
                         {"TROUPE_WORKERS_PER_NODE", "2"},
                         {"TROUPE_HEAD_PORT", "31000"}}};
  const auto job = read_indexed_job(env.reader());
  EXPECT_EQ(job.hosts, (std::vector<std::string>{"troupe-0.troupe", "troupe-1.troupe", "troupe-2.troupe"}));
  EXPECT_EQ(job.index, 2);
  EXPECT_EQ(job.workers_per_node, 2);
  EXPECT_EQ(job.head_port, 31000);
  const auto manifest = parse_manifest(manifest_for_hosts(job.hosts, {2, 2, 2}, nlohmann::json::object()), "env");
  EXPECT_EQ(manifest.head_host, "troupe-0.troupe");
  EXPECT_EQ(manifest.world_size(), 6);
}

TEST(IndexedJob, AHostListAndTroupesOwnIndex) {
  const environment env{{{"TROUPE_NODE_INDEX", "1"}, {"TROUPE_HOSTS", "198.18.1.1,198.18.1.2"}}};
  const auto job = read_indexed_job(env.reader());
  EXPECT_EQ(job.hosts, (std::vector<std::string>{"198.18.1.1", "198.18.1.2"}));
  EXPECT_EQ(job.index, 1);
  EXPECT_EQ(job.workers_per_node, 1);
  EXPECT_EQ(job.head_port, 0);
}

TEST(IndexedJob, EachFlawNamesItsVariable) {
  EXPECT_NE(error_of({{{"JOB_COMPLETION_INDEX", "0"}}}).find("set TROUPE_HOSTS"), std::string::npos);
  EXPECT_NE(error_of({{{"TROUPE_HOSTS", "a,b"}}}).find("neither JOB_COMPLETION_INDEX"), std::string::npos);
  EXPECT_NE(error_of({{{"TROUPE_HOSTS", "a,b"}, {"JOB_COMPLETION_INDEX", "2"}}}).find("JOB_COMPLETION_INDEX=\"2\": expected a whole number in 0..1"),
            std::string::npos);
  EXPECT_NE(error_of({{{"TROUPE_HOSTS", "a,,b"}, {"TROUPE_NODE_INDEX", "0"}}}).find("\"\" is not a host name"),
            std::string::npos);
  EXPECT_NE(error_of({{{"TROUPE_NODES", "2"}, {"TROUPE_HOST_TEMPLATE", "troupe"}, {"TROUPE_NODE_INDEX", "0"}}})
                .find("expected \"{index}\""),
            std::string::npos);
  EXPECT_NE(error_of({{{"TROUPE_NODES", "two"}, {"TROUPE_HOST_TEMPLATE", "t-{index}"}, {"TROUPE_NODE_INDEX", "0"}}})
                .find("TROUPE_NODES=\"two\""),
            std::string::npos);
  EXPECT_NE(error_of({{{"TROUPE_HOSTS", "a"}, {"TROUPE_NODE_INDEX", "0"}, {"TROUPE_WORKERS_PER_NODE", "0"}}})
                .find("TROUPE_WORKERS_PER_NODE"),
            std::string::npos);
  EXPECT_NE(error_of({{{"TROUPE_HOSTS", "a"}, {"TROUPE_NODE_INDEX", "0"}, {"TROUPE_HEAD_PORT", "70000"}}})
                .find("TROUPE_HEAD_PORT"),
            std::string::npos);
}

}  // namespace
}  // namespace troupe::cluster
