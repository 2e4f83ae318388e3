#include "actors/data_loader.hpp"

#include <caf/all.hpp>

#include "messages/atoms.hpp"
#include "messages/error_code.hpp"
#include "actors/protocol/micro_batch.hpp"

namespace troupe::actors {
namespace {

/// The counts of the window s.next_window over all ranks' shares (every global position of it),
/// or over this rank's share only (settings.own_share_counts).
compute::window_counts count_window(const data_loader_state& s, const data_loader_settings& settings,
                                    uint64_t micro_batches) {
  std::vector<compute::sample_ref> samples;
  if (settings.own_share_counts) {
    for (uint64_t micro = 0; micro < micro_batches; ++micro) {
      const auto range = compute::micro_batch_range(settings.start_position, s.next_window, settings.window_samples,
                                                    settings.rank, settings.world, micro, settings.micro_size);
      for (uint64_t i = 0; i < range.count; ++i) samples.push_back(s.order->at(range.first + i));
    }
    return s.builder->count(samples);
  }
  const uint64_t first = settings.start_position + s.next_window * settings.window_samples;
  samples.reserve(settings.window_samples);
  for (uint64_t i = 0; i < settings.window_samples; ++i) samples.push_back(s.order->at(first + i));
  return s.builder->count(samples);
}

}  // namespace

caf::behavior data_loader(caf::stateful_actor<data_loader_state>* self, data_loader_settings settings) {
  self->state.builder = std::make_unique<io::mlm_batch_builder>(*settings.dataset, settings.mask_probability,
                                                                settings.seed, settings.token_weights,
                                                                settings.max_ngram, settings.word_continuations);
  self->state.order = std::make_unique<compute::sample_order>(settings.dataset->size(), settings.seed);
  if (!settings.sample_log.empty()) self->state.sample_log.open(settings.sample_log, std::ios::app);
  return {
      // Before any credit: a replica copied from one a window ahead goes on from the donor's data.
      [=](messages::skip_atom, int64_t windows) {
        if (self->state.next_window == 0 && self->state.next_micro == 0 && windows > 0)
          self->state.next_window = static_cast<uint64_t>(windows);
      },
      [=](messages::credit_atom, int64_t granted, const caf::actor& worker) {
        auto& s = self->state;
        s.credit += granted;
        try {
          const uint64_t micro_batches =
              compute::micro_batches_per_window(settings.window_samples, settings.world, settings.micro_size);
          while (s.credit > 0 && s.next_window < settings.windows) {
            if (s.next_micro == 0) {
              settings.faults.before_window_data(settings.start_step + static_cast<int64_t>(s.next_window) + 1);
              s.window_counts = count_window(s, settings, micro_batches);
            }
            const auto range =
                compute::micro_batch_range(settings.start_position, s.next_window, settings.window_samples,
                                           settings.rank, settings.world, s.next_micro, settings.micro_size);
            std::vector<compute::sample_ref> samples;
            for (uint64_t i = 0; i < range.count; ++i) {
              samples.push_back(s.order->at(range.first + i));
              if (s.sample_log.is_open())
                s.sample_log << range.first + i << ' ' << samples.back().epoch << ' ' << samples.back().sample_id << '\n';
            }
            if (s.sample_log.is_open()) s.sample_log.flush();
            micro_batch batch;
            if (!samples.empty()) batch.batch = s.builder->build(samples);  // empty: a tiny window's spare slot
            batch.batch.whole_window = s.window_counts;
            batch.window_index = s.next_window;
            batch.micro = static_cast<uint32_t>(s.next_micro);
            batch.last_in_window = s.next_micro + 1 == micro_batches;
            batch.batch.first_position = range.first;
            self->send(worker, messages::batch_atom::value, std::move(batch));
            --s.credit;
            if (++s.next_micro == micro_batches) {
              s.next_micro = 0;
              ++s.next_window;
            }
          }
        } catch (const std::exception& e) {
          self->quit(messages::make_error(messages::errc::data_failed, e.what()));
        }
      },
  };
}

}  // namespace troupe::actors
