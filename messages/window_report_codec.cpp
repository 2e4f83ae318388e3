#include "messages/window_report_codec.hpp"

#include "messages/capnp_message.hpp"
#include "messages/schemas/metrics.capnp.h"

namespace troupe::messages {

std::vector<uint8_t> encode_window_report(const window_report& r) {
  capnp::MallocMessageBuilder message;
  auto out = message.initRoot<schema::WindowReport>();
  out.setStep(r.step);
  out.setRank(r.rank);
  out.setLoss(r.loss);
  out.setLr(r.lr);
  out.setGradNorm(r.grad_norm);
  out.setSamples(r.samples);
  out.setTokens(r.tokens);
  out.setMaskedTokens(r.masked_tokens);
  out.setWindowSeconds(r.window_seconds);
  out.setDataWaitSeconds(r.data_wait_seconds);
  out.setForwardSeconds(r.forward_seconds);
  out.setBackwardSeconds(r.backward_seconds);
  out.setOptimizerSeconds(r.optimizer_seconds);
  out.setEpoch(r.epoch);
  out.setNextPosition(r.next_position);
  out.setCheckpointStallSeconds(r.checkpoint_stall_seconds);
  out.setCheckpointsSkipped(r.checkpoints_skipped);
  out.setParameterHash(r.parameter_hash);
  out.setWorldSize(r.world_size);
  out.setAllreduceSeconds(r.allreduce_seconds);
  out.setStragglerRank(r.straggler_rank);
  out.setStragglerLatenessSeconds(r.straggler_lateness_seconds);
  return flat_message_bytes<std::vector<uint8_t>>(message);
}

window_report decode_window_report(const std::vector<uint8_t>& bytes) {
  return read_flat_message<schema::WindowReport>(bytes.data(), bytes.size(), capnp::ReaderOptions{}, "WindowReport",
                                                 [](schema::WindowReport::Reader in) {
    window_report r;
    r.step = in.getStep();
    r.rank = in.getRank();
    r.loss = in.getLoss();
    r.lr = in.getLr();
    r.grad_norm = in.getGradNorm();
    r.samples = in.getSamples();
    r.tokens = in.getTokens();
    r.masked_tokens = in.getMaskedTokens();
    r.window_seconds = in.getWindowSeconds();
    r.data_wait_seconds = in.getDataWaitSeconds();
    r.forward_seconds = in.getForwardSeconds();
    r.backward_seconds = in.getBackwardSeconds();
    r.optimizer_seconds = in.getOptimizerSeconds();
    r.epoch = in.getEpoch();
    r.next_position = in.getNextPosition();
    r.checkpoint_stall_seconds = in.getCheckpointStallSeconds();
    r.checkpoints_skipped = in.getCheckpointsSkipped();
    r.parameter_hash = in.getParameterHash();
    r.world_size = in.getWorldSize();
    r.allreduce_seconds = in.getAllreduceSeconds();
    r.straggler_rank = in.getStragglerRank();
    r.straggler_lateness_seconds = in.getStragglerLatenessSeconds();
    return r;
  });
}

}  // namespace troupe::messages
