#include <ucp/api/ucp.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "io/comm/ucx/ucx_check.hpp"
#include "io/comm/ucx/ucx_transport.hpp"

namespace troupe::io {
namespace {

// UCX's own switches for failure detection over shared memory (see ucx_context()).
constexpr const char* mm_error_handling_env = "UCX_MM_ERROR_HANDLING";
constexpr const char* sysv_error_handling_env = "UCX_SYSV_ERROR_HANDLING";
constexpr const char* posix_error_handling_env = "UCX_POSIX_ERROR_HANDLING";
constexpr const char* tcp_nonblocking_connect_env = "UCX_TCP_CONN_NB";
constexpr std::uint64_t user_tag_limit = std::uint64_t{1} << transport_tag_bits;

/// Whether UCX may use a shared-memory transport under the UCX_TLS list `tls` ("" or "all":
/// every transport; "^a,b": all but those). Aliases "sm", "shm" and "mm" name them all.
bool shared_memory_allowed(const std::string& tls) {
  if (tls.empty() || tls == "all") return true;
  const bool excluding = tls.front() == '^';
  std::istringstream names(excluding ? tls.substr(1) : tls);
  std::set<std::string> listed;
  for (std::string name; std::getline(names, name, ',');) listed.insert(name);
  const bool all_named = listed.count("sm") || listed.count("shm") || listed.count("mm") ||
                         (listed.count("sysv") && listed.count("posix"));
  const bool some_named = all_named || listed.count("sysv") || listed.count("posix");
  return excluding ? !all_named : some_named;
}

/// A UCP context as ucx_context's comment says, made with `tls` (or UCX_TLS when empty).
ucp_context_h make_ucp_context(const std::string& tls) {
  ucp_config_t* config = nullptr;
  ucx_check(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read", -1);
  const auto modify = [&](const char* name, const std::string& value) {
    const ucs_status_t status = ucp_config_modify(config, name, value.c_str());
    if (status == UCS_OK) return;
    ucp_config_release(config);
    ucx_check(status, concat("ucp_config_modify(", name, "=", value, ")").c_str(), -1);
  };
  if (!tls.empty()) modify("TLS", tls);
  const char* environment_tls = std::getenv("UCX_TLS");
  const std::string tls_in_use = !tls.empty() ? tls : environment_tls != nullptr ? environment_tls : "";
  // Endpoints ask for peer failure detection, and UCX 1.13's shared-memory transports do not
  // offer it unless told to, so every endpoint between two processes of one host would fall
  // back to TCP over loopback (a third of the bandwidth). Enabling it keeps shared memory
  // (sysv/posix, with keepalive); the zero-copy CMA transport still has no failure detection
  // and stays unused. Whoever sets one of these variables decides for themselves.
  const bool user_decides = std::getenv(mm_error_handling_env) != nullptr ||
                            std::getenv(sysv_error_handling_env) != nullptr ||
                            std::getenv(posix_error_handling_env) != nullptr;
  if (!user_decides && shared_memory_allowed(tls_in_use)) modify("MM_ERROR_HANDLING", "y");
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_NAME |
                      UCP_PARAM_FIELD_TAG_SENDER_MASK;
  // WAKEUP: a wait for a peer across a network sleeps on the worker's event descriptor.
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  params.tag_sender_mask = ~(user_tag_limit - 1);  // the sender's rank (see the tag layout)
  // Each reducer thread creates, drives and destroys its own worker on this context.
  params.mt_workers_shared = 1;
  params.name = "troupe";
  ucp_context_h context = nullptr;
  const ucs_status_t status = ucp_init(&params, config, &context);
  ucp_config_release(config);
  ucx_check(status, "ucp_init", -1);
  return context;
}

}  // namespace

ucx_context::ucx_context(const std::string& tls, std::chrono::seconds stranded_grace)
    : impl_(std::make_unique<impl>()) {
  // UCX 1.13 opens a TCP endpoint with a blocking connect (UCX_TCP_CONN_NB defaults to n):
  // ucp_ep_create towards a peer whose host is cut off waits out TCP's connect timeout (about
  // two minutes), and a node wiring a new generation hears nothing of its head meanwhile — the
  // next generation's news included (docs/faults.md#the-failover-drill). Non-blocking, the
  // endpoint is made at once, and a peer that never answers fails the ring's wait as any silent
  // peer does. Through the environment, before UCX reads it: ucp_config_modify("TCP_CONN_NB")
  // is accepted but does not reach the TCP transport's settings in UCX 1.13 (tried). Whoever
  // sets the variable decides for themselves. A context is made on the main thread before the
  // threads that read the environment (CAF's, the reducers') start.
  ::setenv(tcp_nonblocking_connect_env, "y", /*overwrite=*/0);
  impl_->tls = tls;
  impl_->stranded_grace = stranded_grace;
  impl_->context = make_ucp_context(tls);
}

ucp_worker_h create_worker(ucx_context::impl& owner) {
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  params.thread_mode = UCS_THREAD_MODE_SINGLE;
  constexpr int attempts = 3;  // a device may go again between a renewal and the next try
  for (int attempt = 1;; ++attempt) {
    ucp_context_h context = nullptr;
    {
      std::lock_guard<std::mutex> lock(owner.context_mutex);
      context = owner.context;
    }
    ucp_worker_h worker = nullptr;
    const ucs_status_t status = ucp_worker_create(context, &params, &worker);
    if (status != UCS_ERR_NO_DEVICE || attempt == attempts) {
      ucx_check(status, "ucp_worker_create", -1);
      return worker;
    }
    std::lock_guard<std::mutex> lock(owner.context_mutex);
    if (owner.context != context) continue;  // another thread renewed it meanwhile
    spdlog::info("ucx: a network device listed when UCX started is gone (ucp_worker_create: {}); "
                 "UCX lists the host's devices again",
                 ucs_status_string(status));
    ucp_context_h renewed = make_ucp_context(owner.tls);
    owner.replaced.push_back(owner.context);
    owner.context = renewed;
  }
}

void close_in_background(ucx_context::impl& owner, std::function<void()> close) {
  {
    std::lock_guard<std::mutex> lock(owner.closing_mutex);
    ++owner.closing;
  }
  std::thread([&owner, close = std::move(close)] {
    close();
    std::lock_guard<std::mutex> lock(owner.closing_mutex);
    --owner.closing;
    owner.all_closed.notify_all();
  }).detach();
}

void set_aside(ucx_context::impl& owner, std::function<void()> reap) {
  std::lock_guard<std::mutex> lock(owner.closing_mutex);
  owner.set_aside.push_back({std::move(reap), std::chrono::steady_clock::now()});
}

namespace {

/// Takes out of `owner` the stranded transports set aside at least `age` ago.
std::vector<ucx_context::impl::stranded_transport> take_stranded(ucx_context::impl& owner,
                                                                 std::chrono::steady_clock::duration age) {
  const auto set_aside_by = std::chrono::steady_clock::now() - age;
  std::lock_guard<std::mutex> lock(owner.closing_mutex);
  const auto due = std::stable_partition(owner.set_aside.begin(), owner.set_aside.end(),
                                         [&](const auto& stranded) { return stranded.since > set_aside_by; });
  std::vector<ucx_context::impl::stranded_transport> taken(std::make_move_iterator(due),
                                                           std::make_move_iterator(owner.set_aside.end()));
  owner.set_aside.erase(due, owner.set_aside.end());
  return taken;
}

}  // namespace

void reap_stranded_in_background(ucx_context::impl& owner) {
  auto due = std::make_shared<std::vector<ucx_context::impl::stranded_transport>>(
      take_stranded(owner, owner.stranded_grace));
  if (due->empty()) return;
  close_in_background(owner, [due, grace = owner.stranded_grace] {
    for (auto& stranded : *due) stranded.reap();
    spdlog::info("ucx: {} transport(s) set aside mid-message {} s or more ago reaped (their workers destroyed, "
                 "undriven)", due->size(), grace.count());
  });
}

std::size_t ucx_context::reap_stranded(std::chrono::steady_clock::duration age) {
  const auto due = take_stranded(*impl_, age);
  for (const auto& stranded : due) stranded.reap();
  return due.size();
}

std::size_t ucx_context::stranded() const {
  std::lock_guard<std::mutex> lock(impl_->closing_mutex);
  return impl_->set_aside.size();
}

/// Waits a while for transports still closing in the background; one that does not finish
/// (stuck sending to a host cut off) keeps the context, which is then left to the process's end.
ucx_context::~ucx_context() {
  std::unique_lock<std::mutex> lock(impl_->closing_mutex);
  if (!impl_->all_closed.wait_for(lock, std::chrono::seconds(10), [this] { return impl_->closing == 0; })) {
    std::fprintf(stderr, "ucx: %d transport(s) still closing towards a peer cut off; UCX is left to the process's end\n",
                 impl_->closing);
    lock.unlock();
    static_cast<void>(impl_.release());
    return;
  }
  if (!impl_->set_aside.empty()) {  // their workers still live on this context
    lock.unlock();
    static_cast<void>(impl_.release());
    return;
  }
  lock.unlock();
  for (ucp_context_h replaced : impl_->replaced) ucp_cleanup(replaced);
  if (impl_->context != nullptr) ucp_cleanup(impl_->context);
}

}  // namespace troupe::io
