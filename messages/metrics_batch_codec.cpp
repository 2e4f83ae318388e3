#include "messages/metrics_batch_codec.hpp"

#include "messages/capnp_message.hpp"
#include "messages/schemas/metrics.capnp.h"

namespace troupe::messages {
namespace {

// A batch holds at most a node's bounded queue (actors/metrics.hpp), a few KiB per window
// report: 64 MiB of words is far above any honest batch and far below a memory problem.
capnp::ReaderOptions batch_limits() {
  capnp::ReaderOptions limits;
  limits.traversalLimitInWords = 8 << 20;
  limits.nestingLimit = 8;
  return limits;
}

void write_window(schema::WindowReport::Builder out, const window_report& r) {
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
  out.setLatenessSeconds(r.lateness_seconds);
  auto seconds = out.initRingSeconds(static_cast<unsigned>(r.ring_seconds.size()));
  for (unsigned i = 0; i < seconds.size(); ++i) seconds.set(i, r.ring_seconds[i]);
  auto bytes = out.initRingBytes(static_cast<unsigned>(r.ring_bytes.size()));
  for (unsigned i = 0; i < bytes.size(); ++i) bytes.set(i, r.ring_bytes[i]);
  out.setEvalLossSum(r.eval_loss_sum);
  out.setEvalTokens(r.eval_tokens);
  out.setEvalSeconds(r.eval_seconds);
  out.setDistilled(r.distilled);
  out.setLossCe(r.loss_ce);
  out.setLossMlm(r.loss_mlm);
  out.setLossCos(r.loss_cos);
  out.setLossMse(r.loss_mse);
  out.setTeacherSeconds(r.teacher_seconds);
  out.setSentenceOrder(r.sentence_order);
  out.setLossSop(r.loss_sop);
  out.setSopAccuracy(r.sop_accuracy);
  out.setLossScale(r.loss_scale);
  out.setSkippedStep(r.skipped_step);
}

window_report read_window(schema::WindowReport::Reader in) {
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
  r.lateness_seconds = in.getLatenessSeconds();
  for (double s : in.getRingSeconds()) r.ring_seconds.push_back(s);
  for (int64_t b : in.getRingBytes()) r.ring_bytes.push_back(b);
  r.eval_loss_sum = in.getEvalLossSum();
  r.eval_tokens = in.getEvalTokens();
  r.eval_seconds = in.getEvalSeconds();
  r.distilled = in.getDistilled();
  r.loss_ce = in.getLossCe();
  r.loss_mlm = in.getLossMlm();
  r.loss_cos = in.getLossCos();
  r.loss_mse = in.getLossMse();
  r.teacher_seconds = in.getTeacherSeconds();
  r.sentence_order = in.getSentenceOrder();
  r.loss_sop = in.getLossSop();
  r.sop_accuracy = in.getSopAccuracy();
  r.loss_scale = in.getLossScale();
  r.skipped_step = in.getSkippedStep();
  return r;
}

}  // namespace

std::string encode_metrics_batch(const metrics_batch& batch) {
  capnp::MallocMessageBuilder message;
  auto out = message.initRoot<schema::MetricsBatch>();
  out.setNode(batch.node);
  out.setGeneration(batch.generation);
  out.setSequence(batch.sequence);
  out.setUnixSeconds(batch.unix_seconds);
  out.setResidentBytes(batch.resident_bytes);
  out.setDropped(batch.dropped);
  out.setFinal(batch.final);
  out.setWrittenThrough(batch.written_through);
  auto windows = out.initWindows(static_cast<unsigned>(batch.windows.size()));
  for (unsigned i = 0; i < windows.size(); ++i) write_window(windows[i], batch.windows[i]);
  auto checkpoints = out.initCheckpoints(static_cast<unsigned>(batch.checkpoints.size()));
  for (unsigned i = 0; i < checkpoints.size(); ++i) {
    const auto& c = batch.checkpoints[i];
    checkpoints[i].setStep(c.step);
    checkpoints[i].setUnixSeconds(c.unix_seconds);
    checkpoints[i].setSeconds(c.seconds);
    checkpoints[i].setBytes(c.bytes);
    checkpoints[i].setSkipped(c.skipped);
  }
  auto log = out.initLog(static_cast<unsigned>(batch.log.size()));
  for (unsigned i = 0; i < log.size(); ++i) {
    log[i].setUnixSeconds(batch.log[i].unix_seconds);
    log[i].setLevel(batch.log[i].level);
    log[i].setText(batch.log[i].text);
  }
  return flat_message_bytes<std::string>(message);
}

metrics_batch decode_metrics_batch(const std::string& bytes) {
  return read_flat_message<schema::MetricsBatch>(bytes.data(), bytes.size(), batch_limits(), "MetricsBatch",
                                                 [](schema::MetricsBatch::Reader in) {
    metrics_batch batch;
    batch.node = in.getNode();
    batch.generation = in.getGeneration();
    batch.sequence = in.getSequence();
    batch.unix_seconds = in.getUnixSeconds();
    batch.resident_bytes = in.getResidentBytes();
    batch.dropped = in.getDropped();
    batch.final = in.getFinal();
    batch.written_through = in.getWrittenThrough();
    for (auto window : in.getWindows()) batch.windows.push_back(read_window(window));
    for (auto c : in.getCheckpoints())
      batch.checkpoints.push_back({c.getStep(), c.getUnixSeconds(), c.getSeconds(), c.getBytes(), c.getSkipped()});
    for (auto line : in.getLog()) batch.log.push_back({line.getUnixSeconds(), line.getLevel(), line.getText()});
    return batch;
  });
}

}  // namespace troupe::messages
