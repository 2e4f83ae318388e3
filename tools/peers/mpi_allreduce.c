/* Peer benchmark: OpenMPI MPI_Allreduce, float sum, out of place (sendbuf != recvbuf), from
 * ordinary private malloc'd buffers, one process per rank.
 *
 *   mpicc -O2 -o mpi_allreduce mpi_allreduce.c
 *   mpirun --allow-run-as-root --oversubscribe -np 2 ./mpi_allreduce [--bytes 4K,64K,1M,4M,16M,64M] [--iters N]
 *
 * What is timed: for each size, 3 warm-up calls, MPI_Barrier, then N calls (default 100 below
 * 16 MiB, 10 from 16 MiB), each timed on its own with MPI_Wtime; a rank's time per call is the
 * sum of its timed calls / N, and the reported time is the slowest rank's (MPI_Allreduce MAX), as
 * nccl-tests reports it. algbw = bytes / time, busbw = algbw * 2(n-1)/n (nccl-tests definitions).
 *
 * How it checks itself: every call's result is checked, after its clock has stopped and before
 * the next call starts. Element i of rank r's send buffer holds (r+1) + ((i+phase) % 7), small
 * integers, so every float sum is exact in any order and must equal n(n+1)/2 + n*((i+phase) % 7).
 * Calls alternate between two send buffers (phase 0 and 1), whose sums differ in every element,
 * so a call that left the receive buffer untouched fails the check too. Wrong elements are
 * counted over all calls (warm-up included) and ranks, as nccl-tests' #wrong; any wrong element
 * makes "correct" false and the exit status 1.
 *
 * Prints one JSON line (rank 0):
 *   {"peer":"mpi","world":N,"results":[{"bytes":..,"time_us":..,"algbw_GBs":..,"busbw_GBs":..,"wrong":0},...],"correct":true}
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t parse_bytes(const char* text) {
  char* end;
  size_t value = strtoull(text, &end, 10);
  if (*end == 'K' || *end == 'k') value <<= 10;
  else if (*end == 'M' || *end == 'm') value <<= 20;
  else if (*end == 'G' || *end == 'g') value <<= 30;
  return value;
}

/* j runs through (i + phase) % 7 without a division per element. */
static void fill(float* buf, size_t count, int rank, int phase) {
  for (size_t i = 0, j = phase; i < count; i++, j = j == 6 ? 0 : j + 1) buf[i] = (float)(rank + 1) + (float)j;
}

static long long count_wrong(const float* buf, size_t count, int n, int phase) {
  long long wrong = 0;
  const float base = (float)n * (n + 1) / 2;
  for (size_t i = 0, j = phase; i < count; i++, j = j == 6 ? 0 : j + 1) wrong += buf[i] != base + (float)(n * j);
  return wrong;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const char* list = "4K,64K,1M,4M,16M,64M";
  int fixed_iters = 0;
  for (int a = 1; a + 1 < argc; a += 2) {
    if (!strcmp(argv[a], "--bytes")) list = argv[a + 1];
    else if (!strcmp(argv[a], "--iters")) fixed_iters = atoi(argv[a + 1]);
  }
  char* sizes = strdup(list);
  int all_correct = 1, first = 1;
  if (rank == 0) printf("{\"peer\":\"mpi\",\"world\":%d,\"out_of_place\":true,\"results\":[", n);
  for (char* item = strtok(sizes, ","); item; item = strtok(NULL, ",")) {
    const size_t bytes = parse_bytes(item), count = bytes / sizeof(float);
    if (count == 0 || bytes % sizeof(float)) {
      if (rank == 0) fprintf(stderr, "mpi_allreduce: bad size %s\n", item);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    float* send[2] = {malloc(bytes), malloc(bytes)};
    float* recv = malloc(bytes);
    fill(send[0], count, rank, 0);
    fill(send[1], count, rank, 1);
    memset(recv, 0, bytes);
    const int iters = fixed_iters > 0 ? fixed_iters : bytes >= (16u << 20) ? 10 : 100;
    long long wrong = 0;
    for (int w = 0; w < 3; w++) {
      MPI_Allreduce(send[w % 2], recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      wrong += count_wrong(recv, count, n, w % 2);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double timed = 0;
    for (int i = 0; i < iters; i++) {
      const double t0 = MPI_Wtime();
      MPI_Allreduce(send[i % 2], recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      timed += MPI_Wtime() - t0;
      wrong += count_wrong(recv, count, n, i % 2);
    }
    double per_call = timed / iters, slowest;
    long long wrong_all;
    MPI_Allreduce(&per_call, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&wrong, &wrong_all, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (wrong_all) all_correct = 0;
    const double algbw = bytes / slowest / 1e9;
    if (rank == 0)
      printf("%s{\"bytes\":%zu,\"time_us\":%.2f,\"algbw_GBs\":%.4f,\"busbw_GBs\":%.4f,\"iterations\":%d,\"wrong\":%lld}",
             first ? "" : ",", bytes, slowest * 1e6, algbw, algbw * 2.0 * (n - 1) / n, iters, wrong_all);
    first = 0;
    free(send[0]);
    free(send[1]);
    free(recv);
  }
  if (rank == 0) printf("],\"correct\":%s}\n", all_correct ? "true" : "false");
  fflush(stdout);
  free(sizes);
  MPI_Finalize();
  return all_correct ? 0 : 1;
}
