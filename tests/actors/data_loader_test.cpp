// The data_loader actor: credit-bounded prefetch and the global sample order.

#include "actors/data_loader.hpp"

#include <caf/all.hpp>
#include <gtest/gtest.h>

#include <set>

#include "io/data/synthetic_dataset.hpp"
#include "messages/atoms.hpp"
#include "actors/protocol/micro_batch.hpp"
#include "messages/type_registration.hpp"
#include "tests/support/test_corpus.hpp"

namespace troupe::actors {
namespace {

using namespace std::chrono_literals;

class data_loader_test : public ::testing::Test {
 protected:
  void SetUp() override {
    io::write_synthetic_dataset(dir_ / "data", 64, 16, 200, 3);
    dataset_ = std::make_shared<const io::token_dataset>(dir_ / "data", "train");
    messages::register_types(config_);
    system_ = std::make_unique<caf::actor_system>(config_);
  }

  data_loader_settings settings(uint64_t rank, uint64_t world) const {
    data_loader_settings s;
    s.dataset = dataset_;
    s.seed = 5;
    s.rank = rank;
    s.world = world;
    s.micro_size = 4;
    s.window_samples = 8 * world;  // 2 micro-batches of 4 per rank
    s.windows = 3;
    return s;
  }

  /// Receives one batch or times out (returns false).
  static bool receive_batch(caf::scoped_actor& self, actors::micro_batch& out, std::chrono::milliseconds wait) {
    bool got = false;
    self->receive([&](messages::batch_atom, actors::micro_batch& batch) { out = std::move(batch), got = true; },
                  caf::after(wait) >> [] {});
    return got;
  }

  testing::temp_dir dir_;
  std::shared_ptr<const io::token_dataset> dataset_;
  caf::actor_system_config config_;
  std::unique_ptr<caf::actor_system> system_;
};

TEST_F(data_loader_test, sends_no_more_than_the_credit_it_was_given) {
  caf::scoped_actor self{*system_};
  auto loader = system_->spawn<caf::detached>(data_loader, settings(0, 1));
  self->send(loader, messages::credit_atom::value, int64_t{3}, caf::actor_cast<caf::actor>(self));
  actors::micro_batch batch;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(receive_batch(self, batch, 10s)) << "batch " << i;
  EXPECT_FALSE(receive_batch(self, batch, 300ms)) << "sent a batch beyond its credit";
  self->send(loader, messages::credit_atom::value, int64_t{1}, caf::actor_cast<caf::actor>(self));
  ASSERT_TRUE(receive_batch(self, batch, 10s));
  EXPECT_EQ(batch.window_index, 1u);  // 4th micro-batch: window 1, micro 1
  EXPECT_EQ(batch.micro, 1u);
  // Credit beyond the run's end yields exactly the remaining batches.
  self->send(loader, messages::credit_atom::value, int64_t{100}, caf::actor_cast<caf::actor>(self));
  int remaining = 0;
  while (receive_batch(self, batch, 300ms)) ++remaining;
  EXPECT_EQ(remaining, 2);
  self->send_exit(loader, caf::exit_reason::user_shutdown);
}

TEST_F(data_loader_test, two_ranks_cover_each_window_without_overlap) {
  caf::scoped_actor self{*system_};
  std::multiset<uint64_t> positions;
  for (uint64_t rank = 0; rank < 2; ++rank) {
    auto loader = system_->spawn<caf::detached>(data_loader, settings(rank, 2));
    self->send(loader, messages::credit_atom::value, int64_t{6}, caf::actor_cast<caf::actor>(self));
    actors::micro_batch batch;
    for (int i = 0; i < 6; ++i) {
      ASSERT_TRUE(receive_batch(self, batch, 10s));
      EXPECT_EQ(batch.batch.samples, 4);
      for (uint64_t s = 0; s < 4; ++s) positions.insert(batch.batch.first_position + s);
    }
    self->send_exit(loader, caf::exit_reason::user_shutdown);
  }
  // 3 windows × 2 ranks × 2 micro-batches × 4 samples = positions 0..47, each once.
  ASSERT_EQ(positions.size(), 48u);
  uint64_t expected = 0;
  for (auto p : positions) EXPECT_EQ(p, expected++);
}

}  // namespace
}  // namespace troupe::actors
