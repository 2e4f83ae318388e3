#pragma once
/// A fixed set of threads running submitted tasks, each task's result a std::future. What
/// `troupe prepare` tokenizes with: the caller submits batches in order and takes the futures back
/// in the same order, so the output keeps the input's order however many threads there are.

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace troupe::io {

class task_pool {
 public:
  explicit task_pool(std::size_t threads) {
    for (std::size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { work(); });
  }
  ~task_pool() {
    {
      std::lock_guard lock(mutex_);
      closing_ = true;
    }
    wake_.notify_all();
    for (auto& thread : threads_) thread.join();  // tasks queued still run: their futures may be waited on
  }
  task_pool(const task_pool&) = delete;
  task_pool& operator=(const task_pool&) = delete;

  /// Queues `task`; its result (or exception) comes through the future.
  template <typename Task>
  std::future<std::invoke_result_t<Task>> submit(Task task) {
    auto packaged = std::make_shared<std::packaged_task<std::invoke_result_t<Task>()>>(std::move(task));
    auto result = packaged->get_future();
    {
      std::lock_guard lock(mutex_);
      queue_.emplace_back([packaged] { (*packaged)(); });
    }
    wake_.notify_one();
    return result;
  }

 private:
  void work() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [this] { return closing_ || !queue_.empty(); });
        if (queue_.empty()) return;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  bool closing_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace troupe::io
