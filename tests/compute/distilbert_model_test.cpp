// DistilBERT: HF DistilBertForMaskedLM's parameter names, its forward against a reference
// written from HF's modeling_distilbert.py in double precision, and a student built from a
// BERT teacher as the extract script does.

#include "compute/distilbert_model.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <string>

#include "compute/bert_config.hpp"
#include "compute/distillation_config.hpp"
#include "compute/distillation_forward.hpp"
#include "compute/student_init.hpp"
#include "messages/error.hpp"

namespace troupe::compute {
namespace {

bert_config tiny(const std::string& type, int64_t layers = 2) {
  bert_config config;
  config.model_type = type;
  config.vocab_size = 40;
  config.hidden_size = 12;
  config.num_hidden_layers = layers;
  config.num_attention_heads = 3;
  config.intermediate_size = 20;
  config.max_position_embeddings = 16;
  return config;
}

TEST(distilbert_model, parameter_names_are_huggingface_distilbert_for_masked_lm) {
  auto model = make_masked_lm(tiny("distilbert"));
  std::vector<std::string> names;
  int64_t total = 0;
  for (const auto& [name, tensor] : model->hf_named_parameters()) {
    names.push_back(name);
    total += tensor.numel();
  }
  // DistilBertForMaskedLM(config).state_dict() of transformers 4.x for n_layers=2, without the
  // tied vocab_projector.weight.
  std::vector<std::string> expected = {"distilbert.embeddings.word_embeddings.weight",
                                       "distilbert.embeddings.position_embeddings.weight",
                                       "distilbert.embeddings.LayerNorm.weight", "distilbert.embeddings.LayerNorm.bias"};
  for (int layer = 0; layer < 2; ++layer)
    for (const char* part : {"attention.q_lin", "attention.k_lin", "attention.v_lin", "attention.out_lin",
                             "sa_layer_norm", "ffn.lin1", "ffn.lin2", "output_layer_norm"})
      for (const char* kind : {"weight", "bias"})
        expected.push_back("distilbert.transformer.layer." + std::to_string(layer) + "." + part + "." + kind);
  for (const char* name : {"vocab_transform.weight", "vocab_transform.bias", "vocab_layer_norm.weight",
                           "vocab_layer_norm.bias", "vocab_projector.bias"})
    expected.push_back(name);
  EXPECT_EQ(names, expected);
  int64_t registered = 0;
  for (const auto& p : model->parameters()) registered += p.numel();
  EXPECT_EQ(total, registered);
  EXPECT_EQ(parameter_count(tiny("distilbert")), total);
}

/// HF's DistilBERT forward (modeling_distilbert.py, eval mode) in double: q scaled before the
/// product, padded keys filled with the lowest value, post-LayerNorm blocks, exact GELU.
torch::Tensor reference_logits(const std::map<std::string, torch::Tensor>& p, const torch::Tensor& ids,
                               const torch::Tensor& lengths, const torch::Tensor& positions, int64_t heads) {
  auto w = [&](const std::string& name) { return p.at(name).to(torch::kDouble); };
  auto linear = [&](const torch::Tensor& x, const std::string& prefix) {
    return torch::matmul(x, w(prefix + ".weight").t()) + w(prefix + ".bias");
  };
  auto layer_norm = [&](const torch::Tensor& x, const std::string& prefix) {
    return torch::layer_norm(x, {x.size(-1)}, w(prefix + ".weight"), w(prefix + ".bias"), 1e-12);
  };
  const auto batch = ids.size(0), seq = ids.size(1);
  auto x = w("distilbert.embeddings.word_embeddings.weight").index_select(0, ids.reshape({-1})).view({batch, seq, -1}) +
           w("distilbert.embeddings.position_embeddings.weight").narrow(0, 0, seq).unsqueeze(0);
  x = layer_norm(x, "distilbert.embeddings.LayerNorm");
  const auto dim = x.size(-1), per_head = dim / heads;
  const auto padded = (torch::arange(seq).unsqueeze(0) >= lengths.unsqueeze(1)).view({batch, 1, 1, seq});
  for (int layer = 0; p.count("distilbert.transformer.layer." + std::to_string(layer) + ".ffn.lin1.weight"); ++layer) {
    const auto prefix = "distilbert.transformer.layer." + std::to_string(layer);
    auto shape = [&](const torch::Tensor& t) { return t.view({batch, seq, heads, per_head}).transpose(1, 2); };
    auto q = shape(linear(x, prefix + ".attention.q_lin")) / std::sqrt(static_cast<double>(per_head));
    auto k = shape(linear(x, prefix + ".attention.k_lin"));
    auto v = shape(linear(x, prefix + ".attention.v_lin"));
    auto scores = torch::matmul(q, k.transpose(2, 3)).masked_fill(padded, std::numeric_limits<double>::lowest());
    auto context = torch::matmul(torch::softmax(scores, -1), v).transpose(1, 2).reshape({batch, seq, dim});
    auto sa = layer_norm(linear(context, prefix + ".attention.out_lin") + x, prefix + ".sa_layer_norm");
    auto ffn = linear(torch::gelu(linear(sa, prefix + ".ffn.lin1")), prefix + ".ffn.lin2");
    x = layer_norm(ffn + sa, prefix + ".output_layer_norm");
  }
  auto selected = x.reshape({batch * seq, dim}).index_select(0, positions);
  auto transformed = layer_norm(torch::gelu(linear(selected, "vocab_transform")), "vocab_layer_norm");
  return torch::matmul(transformed, w("distilbert.embeddings.word_embeddings.weight").t()) + w("vocab_projector.bias");
}

TEST(distilbert_model, forward_matches_huggingface_maths_in_double) {
  auto model = make_masked_lm(tiny("distilbert"));
  model->eval();
  torch::manual_seed(3);
  std::map<std::string, torch::Tensor> parameters;
  {
    torch::NoGradGuard no_grad;
    for (auto& [name, tensor] : model->hf_named_parameters()) {  // LayerNorms and biases too
      tensor.copy_(torch::randn(tensor.sizes()) * 0.3 + (name.find("layer_norm.weight") != std::string::npos ||
                                                                 name.find("LayerNorm.weight") != std::string::npos
                                                             ? 1.0
                                                             : 0.0));
      parameters[name] = tensor.detach().clone();
    }
  }
  const auto ids = torch::randint(0, 40, {2, 8}, torch::kLong);
  const auto lengths = torch::tensor({8, 5}, torch::kLong);
  const auto positions = torch::tensor({0, 3, 7, 8, 12}, torch::kLong);  // row 1: columns 0 and 4
  torch::NoGradGuard no_grad;
  const auto logits = model->predict(model->encode(ids, torch::zeros_like(ids), lengths), positions);
  const auto expected = reference_logits(parameters, ids, lengths, positions, 3);
  const double difference = (logits.to(torch::kDouble) - expected).abs().max().item<double>();
  std::printf("largest difference from the double-precision reference: %.3g\n", difference);
  EXPECT_LT(difference, 1e-4);
  // Token types do not exist: any ids give the same output.
  const auto with_types = model->predict(model->encode(ids, torch::ones_like(ids), lengths), positions);
  EXPECT_TRUE(torch::equal(with_types, logits));
}

// The soft targets are taken a slice of positions at a time; the parts and the student's
// gradient must not depend on the slicing beyond rounding, and must equal the loss of the whole
// [P, V] logits computed at once. Padding is skipped: row 1 has 5 real tokens of 8.
TEST(distillation_forward, slices_give_the_loss_and_gradient_of_the_whole_logits) {
  auto teacher = make_masked_lm(tiny("bert", 4));
  teacher->reset_weights(5);
  teacher->eval();
  auto student = make_masked_lm(tiny("distilbert", 2));
  student->reset_weights(6);
  student->eval();  // no dropout: the runs must see the same maths
  torch::manual_seed(1);
  mlm_batch batch;
  batch.input_ids = torch::randint(5, 40, {2, 8}, torch::kLong);
  batch.token_type_ids = torch::zeros({2, 8}, torch::kLong);
  batch.lengths = torch::tensor({8, 5}, torch::kLong);
  batch.masked_positions = torch::tensor({1, 6, 9, 12}, torch::kLong);
  batch.labels = torch::tensor({7, 8, 9, 10}, torch::kLong);
  distillation_config config;
  config.weights.alpha_mse = 0.5;
  auto run = [&](int64_t slice) {
    student->zero_grad();
    auto result = distillation_forward(*student, *teacher, batch, config, slice);
    result.parts.total.backward();
    std::vector<torch::Tensor> gradients;
    for (const auto& p : student->parameters()) gradients.push_back(p.grad().clone());
    return std::pair{result.parts, gradients};
  };
  const auto [whole, whole_gradients] = run(1000);
  const auto [sliced, sliced_gradients] = run(3);
  for (const auto& [a, b] : {std::pair{whole.ce, sliced.ce}, {whole.mlm, sliced.mlm}, {whole.cos, sliced.cos},
                             {whole.mse, sliced.mse}, {whole.total, sliced.total}})
    EXPECT_NEAR(a.item<double>(), b.item<double>(), 1e-5 * std::max(1.0, std::abs(a.item<double>())));
  for (std::size_t i = 0; i < whole_gradients.size(); ++i)
    EXPECT_LT((whole_gradients[i] - sliced_gradients[i]).abs().max().item<double>(), 1e-5) << "parameter " << i;

  // The whole loss by hand: 13 real positions (8 + 5), the masked ones among them.
  torch::NoGradGuard no_grad;
  const auto real = torch::tensor({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, torch::kLong);
  const auto s_hidden = student->encode(batch.input_ids, batch.token_type_ids, batch.lengths);
  const auto t_hidden = teacher->encode(batch.input_ids, batch.token_type_ids, batch.lengths);
  const auto expected = distillation_loss(
      student->predict(s_hidden, real), teacher->predict(t_hidden, real), student->predict(s_hidden, batch.masked_positions),
      batch.labels, s_hidden.reshape({-1, 12}).index_select(0, real), t_hidden.reshape({-1, 12}).index_select(0, real),
      config.weights);
  EXPECT_NEAR(whole.total.item<double>(), expected.total.item<double>(), 1e-5 * expected.total.item<double>());
  EXPECT_NEAR(whole.mlm.item<double>(), expected.mlm.item<double>(), 1e-5 * expected.mlm.item<double>());
}

TEST(student_init, copies_the_embeddings_the_named_teacher_layers_and_the_head) {
  auto teacher = make_masked_lm(tiny("bert", 4));
  teacher->reset_weights(11);
  auto student = make_masked_lm(tiny("distilbert", 2));
  student->reset_weights(12);
  init_student_from_teacher(student->hf_named_parameters(), teacher->hf_named_parameters(), {1, 3});
  std::map<std::string, torch::Tensor> s, t;
  for (auto& [name, tensor] : student->hf_named_parameters()) s[name] = tensor;
  for (auto& [name, tensor] : teacher->hf_named_parameters()) t[name] = tensor;
  EXPECT_TRUE(torch::equal(s["distilbert.embeddings.word_embeddings.weight"], t["bert.embeddings.word_embeddings.weight"]));
  EXPECT_TRUE(torch::equal(s["distilbert.embeddings.position_embeddings.weight"],
                           t["bert.embeddings.position_embeddings.weight"]));
  EXPECT_TRUE(torch::equal(s["distilbert.embeddings.LayerNorm.bias"], t["bert.embeddings.LayerNorm.bias"]));
  const std::pair<const char*, const char*> layer_pairs[] = {
      {"attention.q_lin", "attention.self.query"},      {"attention.k_lin", "attention.self.key"},
      {"attention.v_lin", "attention.self.value"},      {"attention.out_lin", "attention.output.dense"},
      {"sa_layer_norm", "attention.output.LayerNorm"},  {"ffn.lin1", "intermediate.dense"},
      {"ffn.lin2", "output.dense"},                     {"output_layer_norm", "output.LayerNorm"}};
  for (const auto& [student_layer, teacher_layer] : {std::pair{0, 1}, std::pair{1, 3}})
    for (const auto& [distilbert, bert] : layer_pairs)
      for (const std::string kind : {".weight", ".bias"}) {
        const auto s_name = "distilbert.transformer.layer." + std::to_string(student_layer) + "." + distilbert + kind;
        const auto t_name = "bert.encoder.layer." + std::to_string(teacher_layer) + "." + bert + kind;
        EXPECT_TRUE(torch::equal(s.at(s_name), t.at(t_name))) << s_name << " from " << t_name;
        const auto other = "bert.encoder.layer." + std::to_string(teacher_layer - 1) + "." + bert + kind;
        if (kind == ".weight" && std::string(bert).find("LayerNorm") == std::string::npos)
          EXPECT_FALSE(torch::equal(s.at(s_name), t.at(other))) << s_name << " must not come from " << other;
      }
  EXPECT_TRUE(torch::equal(s["vocab_transform.weight"], t["cls.predictions.transform.dense.weight"]));
  EXPECT_TRUE(torch::equal(s["vocab_layer_norm.weight"], t["cls.predictions.transform.LayerNorm.weight"]));
  EXPECT_TRUE(torch::equal(s["vocab_projector.bias"], t["cls.predictions.bias"]));
}

TEST(student_init, refuses_unknown_layers_and_other_widths_naming_them) {
  auto teacher = make_masked_lm(tiny("bert", 4));
  auto student = make_masked_lm(tiny("distilbert", 2));
  auto message = [&](const named_tensors& s, const std::vector<int64_t>& layers) {
    try {
      init_student_from_teacher(s, teacher->hf_named_parameters(), layers);
    } catch (const error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(student->hf_named_parameters(), {0, 4}).find("distillation.teacher_layers[1]: 4 is not a layer"),
            std::string::npos);
  EXPECT_NE(message(student->hf_named_parameters(), {0}).find("1 layer(s) listed for a student of 2"),
            std::string::npos);
  auto wide_config = tiny("distilbert", 2);
  wide_config.hidden_size = 15;
  auto wide = make_masked_lm(wide_config);
  EXPECT_NE(message(wide->hf_named_parameters(), {0, 2}).find("the student's distilbert.embeddings.word_embeddings.weight is [40, 15]"),
            std::string::npos)
      << message(wide->hf_named_parameters(), {0, 2});
}

TEST(student_init, default_layers_follow_the_extract_script) {
  EXPECT_EQ(default_teacher_layers(12, 6), (std::vector<int64_t>{0, 2, 4, 7, 9, 11}));
  EXPECT_EQ(default_teacher_layers(4, 2), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(default_teacher_layers(24, 6), (std::vector<int64_t>{0, 2, 4, 6, 8, 10}));
  EXPECT_TRUE(default_teacher_layers(4, 3).empty());  // 0, 2, 4: the teacher has no layer 4
}

}  // namespace
}  // namespace troupe::compute
