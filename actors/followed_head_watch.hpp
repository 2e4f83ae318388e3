#pragma once
// A join that waits on a head which loses its role is abandoned at once (issue 55;
// docs/faults.md#a-join-whose-head-goes).
//
// A node that found the head through etcd (a restarted node; every survivor after the role
// moved) sends its join and waits for the plan, which the head answers only once its generation
// forms: timeouts.join (120 s) and more. If the head it joined is killed, freezes or is cut off
// meanwhile, the answer never comes, and nothing tells the waiting request so: CAF fails a
// request whose receiver is gone only when the message is sent, not while it waits (and a frozen
// process keeps its connections). The job goes on under the role's next holder while this node
// waits out its timeout (timeouts.join_s + 10 s), then ends, and the launcher starts it again:
// 130 s without this node, seen at 16 hosts when the head froze while a restarted node joined it.
//
// So, while such a join waits, a thread reads the head's key in etcd every `period`. Once the key
// holds another term than the one the node followed (another node took the role, or none holds
// it), the thread fails the request itself, with the error CAF would give, and says why: the
// node follows the role through etcd again and joins the head it finds. The key's reads cost one
// etcd request a `period` for each node waiting, and only while it waits.
#include <caf/actor_control_block.hpp>
#include <caf/fwd.hpp>
#include <caf/message_id.hpp>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "io/etcd/etcd_client.hpp"
#include "messages/error.hpp"

namespace troupe::actors {

/// The join was abandoned because the head it waited on lost the role (what() says how).
class head_role_moved : public error {
 public:
  using error::error;
};

struct followed_head_watch_settings {
  io::etcd_settings etcd;
  std::string head_key;                  ///< etcd's key of the head's role
  int64_t followed_term = 0;             ///< the term (the key's create revision) of the head joined
  std::chrono::milliseconds period{500};  ///< between two reads of the key
};

class followed_head_watch {
 public:
  /// Watches for the request whose handle's id (its response's) is `request`, which `waiter` (a
  /// scoped actor, blocked on it) sent.
  followed_head_watch(followed_head_watch_settings settings, caf::strong_actor_ptr waiter, caf::message_id request);
  /// Stops the watch; afterwards the request is failed by the watch only if moved() says so.
  ~followed_head_watch();
  followed_head_watch(const followed_head_watch&) = delete;
  followed_head_watch& operator=(const followed_head_watch&) = delete;

  /// Stops watching (idempotent); call once the request was answered.
  void stop();
  /// Why the watch failed the request; "" when it did not.
  std::string moved() const;

 private:
  void watch();

  followed_head_watch_settings settings_;
  caf::strong_actor_ptr waiter_;
  caf::message_id request_;
  mutable std::mutex mutex_;
  std::condition_variable stopping_;
  bool stopped_ = false;
  std::string moved_;
  std::thread thread_;
};

}  // namespace troupe::actors
