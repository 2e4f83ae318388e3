#pragma once
/// This process's own clocks, as the kernel keeps them: when it was started (its exec) and the
/// CPU time its threads have used since.

namespace troupe::io {

/// Unix seconds (10 ms resolution: the kernel counts a process's start in clock ticks after
/// boot) at which this process was started; 0 where /proc cannot be read. Includes what happens
/// before main: the dynamic loader mapping LibTorch and the other libraries.
double process_started_unix_seconds();

/// CPU seconds (user and system) all of this process's threads have used since it started.
double process_cpu_seconds();

}  // namespace troupe::io
