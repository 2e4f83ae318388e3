#include "messages/window_report_codec.hpp"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <cstring>

#include "compute/error.hpp"
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
  auto words = capnp::messageToFlatArray(message);
  auto bytes = words.asBytes();
  return {bytes.begin(), bytes.end()};
}

window_report decode_window_report(const std::vector<uint8_t>& bytes) {
  if (bytes.size() % sizeof(capnp::word) != 0 || bytes.empty())
    throw make_error("WindowReport: ", bytes.size(), " bytes is not a whole number of Cap'n Proto words");
  std::vector<capnp::word> words(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.data(), bytes.data(), bytes.size());
  try {
    capnp::FlatArrayMessageReader message(kj::arrayPtr(words.data(), words.size()));
    auto in = message.getRoot<schema::WindowReport>();
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
    return r;
  } catch (const kj::Exception& e) {
    throw make_error("WindowReport: malformed Cap'n Proto message: ", e.getDescription().cStr());
  }
}

}  // namespace troupe::messages
