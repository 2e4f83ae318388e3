// A network device that goes while the process runs (io/comm/ucx/ucx_check.hpp, create_worker):
// UCX lists the host's devices once, when its context starts, and opens every one of them again
// for each worker, so a device gone since — a container's veth on a Docker or Kubernetes host,
// a netcluster host taken down beside a running test — made every later ucp_worker_create fail
// with "No such device", and a node could wire no further generation. Root only: it makes and
// removes a veth pair in this machine's own network namespace.

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "io/comm/ucx/ucx_transport.hpp"

namespace troupe::io {
namespace {

using namespace std::chrono_literals;

bool run_quietly(const std::string& command) { return std::system((command + " >/dev/null 2>&1").c_str()) == 0; }

/// A veth pair with an address (198.19.254.1/30) while it lives; removed even when a test fails.
class veth_pair {
 public:
  veth_pair() : name_("tvg" + std::to_string(::getpid() % 100000)) {
    created_ = run_quietly("ip link add " + name_ + "a type veth peer name " + name_ + "b") &&
               run_quietly("ip addr add 198.19.254.1/30 dev " + name_ + "a") &&
               run_quietly("ip link set " + name_ + "a up") && run_quietly("ip link set " + name_ + "b up");
  }
  ~veth_pair() { remove(); }
  veth_pair(const veth_pair&) = delete;
  veth_pair& operator=(const veth_pair&) = delete;

  bool created() const { return created_; }
  void remove() { run_quietly("ip link del " + name_ + "a"); }

 private:
  std::string name_;
  bool created_ = false;
};

/// Sends one byte from `sender` (rank 0) to `receiver` (rank 1); whether it arrived within 10 s.
bool one_byte_arrives(ucx_transport& sender, ucx_transport& receiver) {
  std::uint8_t value = 42, into = 0;
  const auto receive = receiver.post_receive(0, 3, &into, 1);
  const auto send = sender.post_send(1, 3, &value, 1);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  bool received = false, sent = false;
  while ((!received || !sent) && std::chrono::steady_clock::now() < deadline) {
    if (!sent) sent = sender.test(send);
    if (!received) received = receiver.test(receive);
  }
  return received && sent && into == value;
}

TEST(ucx_device_gone, transports_are_still_made_after_a_device_the_context_listed_is_removed) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (it adds and removes a veth pair)";
  veth_pair devices;
  ASSERT_TRUE(devices.created()) << "could not make a veth pair with `ip link add`";
  ucx_context context("tcp");  // lists the pair among the host's devices
  auto before = std::make_unique<ucx_transport>(context, 0);
  devices.remove();

  std::unique_ptr<ucx_transport> sender, receiver;
  ASSERT_NO_THROW(sender = std::make_unique<ucx_transport>(context, 0));
  ASSERT_NO_THROW(receiver = std::make_unique<ucx_transport>(context, 1));
  sender->connect(1, receiver->local_address());
  receiver->connect(0, sender->local_address());
  EXPECT_TRUE(one_byte_arrives(*sender, *receiver));
  // A transport made before the removal still goes with its own context, after the new ones.
  receiver.reset();
  sender.reset();
  before.reset();
}

}  // namespace
}  // namespace troupe::io
