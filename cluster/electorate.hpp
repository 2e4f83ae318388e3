#pragma once
/// Who may vote a silent head out: the head and a few of its members, spread over hosts
/// (docs/faults.md#head-failover).
///
/// A silence vote (cluster/head_silence.hpp) moves the role once more than half of an electorate
/// has voted. Counting every member made each voter read every vote, over and over while the
/// count was open: at a thousand members, a thousand voters each reading a thousand keys every
/// few tens of milliseconds. The electorate is the head (which never votes) and at most
/// `failover.electors` other members, chosen from the members of the head's last state alone, so
/// that every node computes the same one; a job of at most `electors` + 1 members counts every
/// member, as before.
///
/// The electors are spread over the members' hosts: each round takes one member of every host,
/// in the manifest's order of the hosts, the head's own host last (a host lost takes its electors
/// with it, and the head's host is the one whose loss the vote is about); members of a host are
/// taken in the manifest's order. The head writes the electorate beside the state, in the same
/// transaction (cluster/head_record.hpp), so a voter reads a few names, not the state.

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "cluster/manifest.hpp"

namespace troupe::cluster {

struct electorate {
  std::string head;                  ///< the node holding the role: counted, never votes
  std::vector<std::string> electors; ///< the others who vote, in the order chosen

  /// The head and its electors.
  std::size_t size() const { return electors.size() + 1; }
  /// Votes that move the role: more than half of size().
  std::size_t majority() const { return size() / 2 + 1; }
  bool is_elector(const std::string& node) const;
  bool operator==(const electorate& other) const { return head == other.head && electors == other.electors; }
};

/// The electorate of `members` (which hold `head`) under `nodes` (the manifest's, for hosts and
/// order) with at most `electors` voters. Members the manifest does not name come after the
/// others, in name order, each as a host of its own.
electorate choose_electorate(const std::set<std::string>& members, const std::string& head,
                             const std::vector<node_spec>& nodes, int64_t electors);

/// The manifest indices of the head and its electors (the nodes of `nodes`; a name it lacks is
/// left out): the nodes whose heartbeats the head watches (cluster/head_silence.hpp).
std::vector<std::size_t> manifest_indices(const electorate& e, const std::vector<node_spec>& nodes);

/// JSON: {"head": "...", "electors": ["...", ...]}.
std::string encode_electorate(const electorate& e);
/// Throws troupe::error naming `source` when the value is not an encoded electorate.
electorate decode_electorate(const std::string& value, const std::string& source);

}  // namespace troupe::cluster
