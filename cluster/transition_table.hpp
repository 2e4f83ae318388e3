#pragma once
/// What the head's membership machine and a node's machine share: a transition table whose rows
/// say, for a phase and an event, which guard picks which action and what phase follows; the
/// search for the first row that applies; and the rows as names, for tests and docs.

#include <cstddef>

namespace troupe::cluster {

/// One row of a table, by name (the functions behind the names are private to each machine).
template <class Phase, class EventKind>
struct transition {
  Phase phase;
  EventKind event;
  const char* guard;  ///< "" where the row applies whenever the rows above it did not
  const char* action;
  Phase next;
};

/// A row with its functions: `guard` null where it always applies.
template <class Phase, class EventKind, class Context>
struct transition_row {
  Phase from;
  EventKind on;
  const char* guard_name;
  bool (*guard)(const Context&);
  const char* action_name;
  void (*action)(Context&);
  Phase next;

  transition<Phase, EventKind> named() const { return {from, on, guard_name, action_name, next}; }
};

/// The first row of `table` for (`phase`, `event`) whose guard holds for `context`, or null;
/// `known_pair` says whether any row names the pair.
template <class Row, std::size_t N, class Phase, class EventKind, class Context>
const Row* first_applying(const Row (&table)[N], Phase phase, EventKind event, const Context& context,
                          bool& known_pair) {
  known_pair = false;
  for (const auto& row : table) {
    if (row.from != phase || row.on != event) continue;
    known_pair = true;
    if (!row.guard || row.guard(context)) return &row;
  }
  return nullptr;
}

}  // namespace troupe::cluster
