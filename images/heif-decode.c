/*
 * heif-decode: decodes the primary image of HEIF files (iPhone HEICs) to 8-bit interleaved RGB with
 * the system's libheif (Debian's libheif1 with libde265). images/heic-native.ts keeps one of these
 * per decode slot; tools/scripts/heic-decoder.ts builds it.
 *
 *   heif-decode --version
 *   heif-decode --serve      (stdin: requests; stdout: pixels; fd 3: what happened)
 *
 * A request on stdin is "HDEC", the image's length, the decoding threads, 4 bytes of zero and the
 * pixel limit (uint32, uint32, uint32, uint64, little-endian), then the image's bytes. The server
 * reads it, forks a child for it and waits for the child; it never parses image bytes itself.
 * The child decodes; only once the whole picture is decoded does it write to stdout: "RGB8", the
 * width and the height (uint32), then width × height × 3 bytes, row after row, upright (libheif
 * applies irot, imir and clap). Frames on fd 3, each a type byte, a uint32 length and the payload:
 *   'M' text           why the child refused the image or failed (written by the child)
 *   'X' int32 status   the child ended: its exit status, or minus the signal that ended it (the server)
 * Exit status: 0 decoded; 2 not a HEIF image that decodes whole (the image's fault); 3 it declares
 * more than the pixel limit; 4 it needs more memory than its declared size allows; 1 anything else.
 *
 * A child per image, so that whatever a hostile file does to the decoder (a crash, a hang, a
 * runaway allocation, memory it corrupts) ends with that child: the parent kills the server, and
 * with it the child, at its timeout, and each child caps its data segment from the declared size
 * before a pixel is decoded. The server lives on so that the Node process, whose fork costs about
 * 0.1 ms per megabyte it holds, starts it once rather than once per image.
 */
#define _GNU_SOURCE /* pthread_setattr_default_np */
#include <libheif/heif.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* Bumped whenever the requests or the answers change; images/heic-native.ts checks it. */
#define PROTOCOL 2

enum { EXIT_FAILED = 1, EXIT_INVALID = 2, EXIT_TOO_LARGE = 3, EXIT_MEMORY = 4 };

#define CONTROL_FD 3
/* Linux's default ceiling for an unprivileged pipe (/proc/sys/fs/pipe-max-size). */
#define PIPE_BYTES (1 << 20)
/* Decoding threads a request may ask for. */
#define MAX_THREADS 16
/* No image we accept comes near this; a parent that sends more is broken. */
#define MAX_INPUT_BYTES ((uint32_t)1 << 30)

static int read_exact(int fd, void *data, size_t len) {
  unsigned char *p = data;
  size_t got = 0;
  while (got < len) {
    ssize_t n = read(fd, p + got, len - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return got == 0 && n == 0 ? 0 : -1;
    got += (size_t)n;
  }
  return 1;
}

static int write_all(int fd, const void *data, size_t len) {
  const unsigned char *p = data;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

static void put_u32(unsigned char *at, uint32_t v) {
  for (int i = 0; i < 4; i++) at[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_u32(const unsigned char *at) {
  return (uint32_t)at[0] | (uint32_t)at[1] << 8 | (uint32_t)at[2] << 16 | (uint32_t)at[3] << 24;
}

/* One frame on fd 3, in one write (shorter than PIPE_BUF), so that frames never interleave. */
static void frame(char type, const void *payload, uint32_t len) {
  unsigned char out[5 + 1024];
  if (len > sizeof out - 5) len = sizeof out - 5;
  out[0] = (unsigned char)type;
  put_u32(out + 1, len);
  memcpy(out + 5, payload, len);
  write_all(CONTROL_FD, out, 5 + len);
}

/* The child's reason, then its exit status. */
static int refuse(int status, const char *format, ...) {
  char message[1024];
  va_list args;
  va_start(args, format);
  int len = vsnprintf(message, sizeof message, format, args);
  va_end(args);
  frame('M', message, len < 0 ? 0 : len >= (int)sizeof message ? sizeof message - 1 : (uint32_t)len);
  return status;
}

/* The process's data segment now (VmData, bytes): libraries, the input, the parsed file. */
static unsigned long long data_in_use(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  unsigned long long kb = 0;
  while (fgets(line, sizeof line, f)) {
    if (sscanf(line, "VmData: %llu kB", &kb) == 1) break;
  }
  fclose(f);
  return kb * 1024;
}

/*
 * libde265 starts a worker thread for every tile it decodes and waits for it without checking that
 * it started: a thread that cannot get a stack under the cap below would hang the decode. So every
 * thread gets a small stack (the decoders need far less than glibc's 8 MB), and as many as a decode
 * runs at once are started and joined before the cap: glibc keeps their stacks for the threads
 * that follow, which then need no new memory.
 */
#define THREAD_STACK_BYTES ((size_t)1 << 20)

static void *idle(void *barrier) {
  pthread_barrier_wait(barrier);
  return NULL;
}

static int prepare_threads(int threads) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, THREAD_STACK_BYTES);
  pthread_setattr_default_np(&attr);
  pthread_attr_destroy(&attr);
  /* libheif's tile threads (or the main thread), each with libde265's worker beside it. */
  int count = 2 * (threads > 0 ? threads : 1);
  pthread_t ids[2 * MAX_THREADS];
  pthread_barrier_t barrier;
  pthread_barrier_init(&barrier, NULL, (unsigned)count + 1);
  int started = 0;
  for (; started < count; started++) {
    if (pthread_create(&ids[started], NULL, idle, &barrier) != 0) break;
  }
  /* Before any cap, a thread that cannot start means the machine is out of threads: give up. */
  if (started < count) return -1;
  pthread_barrier_wait(&barrier);
  for (int i = 0; i < started; i++) pthread_join(ids[i], NULL);
  pthread_barrier_destroy(&barrier);
  return 0;
}

/*
 * Caps the data segment (heap and private mappings: RLIMIT_DATA) at what the declared size needs:
 * the YCbCr planes (up to 6 bytes a pixel: 4:4:4 at 16 bits), the conversion's RGB copies (up to
 * 9: a 16-bit one, then the 8-bit one), an alpha plane, and tiles in flight. A file whose coded
 * data is larger than it declares then fails to allocate instead of taking the machine's memory.
 */
static int cap_memory(unsigned long long pixels, int threads) {
  if (prepare_threads(threads) != 0) return -1;
  unsigned long long budget = data_in_use() + pixels * 16 + (64ULL << 20);
  struct rlimit limit = {budget, budget};
  return setrlimit(RLIMIT_DATA, &limit);
}

/* The child's work: one image. Returns its exit status. */
static int decode(const unsigned char *bytes, size_t len, unsigned long long max_pixels, int threads) {
  struct heif_context *ctx = heif_context_alloc();
  if (!ctx) return refuse(EXIT_FAILED, "libheif could not start");
  heif_context_set_max_decoding_threads(ctx, threads);
  struct heif_error err = heif_context_read_from_memory_without_copy(ctx, bytes, len, NULL);
  if (err.subcode == heif_suberror_End_of_data) return refuse(EXIT_INVALID, "Image is corrupt or truncated: %s", err.message);
  if (err.code != heif_error_Ok) return refuse(EXIT_INVALID, "HEIF could not be read: %s", err.message);

  struct heif_image_handle *handle;
  err = heif_context_get_primary_image_handle(ctx, &handle);
  if (err.code != heif_error_Ok) return refuse(EXIT_INVALID, "HEIF has no readable image: %s", err.message);
  /* Declared size after libheif's own transformations (rotation, mirroring, crop): checked before a pixel is decoded. */
  int width = heif_image_handle_get_width(handle);
  int height = heif_image_handle_get_height(handle);
  if (width <= 0 || height <= 0) return refuse(EXIT_INVALID, "HEIF image has no dimensions");
  unsigned long long pixels = (unsigned long long)width * (unsigned long long)height;
  if (pixels > max_pixels) return refuse(EXIT_TOO_LARGE, "Image is %d×%d (%llu pixels), over the %llu-pixel limit", width, height, pixels, max_pixels);
  if (cap_memory(pixels, threads) != 0) return refuse(EXIT_FAILED, "could not cap the decoder's memory");

  struct heif_decoding_options *options = heif_decoding_options_alloc();
  if (options->version >= 2) options->convert_hdr_to_8bit = 1;
  /* Missing or damaged tiles are an error, not grey pixels and a warning. */
  if (options->version >= 3) options->strict_decoding = 1;
  struct heif_image *image;
  err = heif_decode_image(handle, &image, heif_colorspace_RGB, heif_chroma_interleaved_RGB, options);
  heif_decoding_options_free(options);
  if (err.code == heif_error_Memory_allocation_error) {
    return refuse(EXIT_MEMORY, "Image needs more memory than its declared size allows to decode (%s); refused as malformed", err.message);
  }
  if (err.subcode == heif_suberror_End_of_data) return refuse(EXIT_INVALID, "Image is corrupt or truncated: %s", err.message);
  if (err.code != heif_error_Ok) return refuse(EXIT_INVALID, "HEIF could not be decoded: %s", err.message);
  /* Belt and braces: a lenient decode would have filled what it could not decode with grey. */
  int warnings = heif_image_get_decoding_warnings(image, 0, NULL, 0);
  if (warnings > 0) return refuse(EXIT_INVALID, "Image is corrupt or truncated: %d part(s) of the HEIF could not be decoded", warnings);
  int stride;
  const uint8_t *plane = heif_image_get_plane_readonly(image, heif_channel_interleaved, &stride);
  if (!plane || heif_image_get_bits_per_pixel(image, heif_channel_interleaved) != 24) return refuse(EXIT_INVALID, "HEIF decoded without an 8-bit RGB plane");
  int plane_width = heif_image_get_width(image, heif_channel_interleaved);
  int plane_height = heif_image_get_height(image, heif_channel_interleaved);
  /* libheif 1.15 does not compare the decoded size with the declared one (later versions do). */
  if (plane_width != width || plane_height != height) {
    return refuse(EXIT_INVALID, "HEIF could not be decoded: Decoded image does not have the size signaled in the file (%d×%d, declared %d×%d)", plane_width, plane_height, width, height);
  }

  unsigned char header[12] = {'R', 'G', 'B', '8'};
  put_u32(header + 4, (uint32_t)width);
  put_u32(header + 8, (uint32_t)height);
  if (write_all(STDOUT_FILENO, header, sizeof header) != 0) return refuse(EXIT_FAILED, "could not write the pixels");
  size_t row = (size_t)width * 3;
  for (int y = 0; y < height; y++) {
    if (write_all(STDOUT_FILENO, plane + (size_t)y * (size_t)stride, row) != 0) return refuse(EXIT_FAILED, "could not write the pixels");
  }
  /* The child ends here: the kernel frees the image, the context and the input at once. */
  return 0;
}

static int serve(void) {
  pid_t server = getpid();
  /* 25 MB of pixels through 64 KB of pipe is 400 round trips between the writer and the reader. */
  fcntl(STDOUT_FILENO, F_SETPIPE_SZ, PIPE_BYTES);
  for (;;) {
    unsigned char request[24];
    int got = read_exact(STDIN_FILENO, request, sizeof request);
    if (got == 0) return 0; /* the parent closed our stdin: it is done with us */
    if (got < 0 || memcmp(request, "HDEC", 4) != 0) {
      fprintf(stderr, "heif-decode: malformed request\n");
      return EXIT_FAILED;
    }
    uint32_t len = get_u32(request + 4);
    uint32_t threads = get_u32(request + 8);
    unsigned long long max_pixels = (unsigned long long)get_u32(request + 16) | (unsigned long long)get_u32(request + 20) << 32;
    if (len > MAX_INPUT_BYTES || threads > MAX_THREADS || max_pixels == 0) {
      fprintf(stderr, "heif-decode: request out of range\n");
      return EXIT_FAILED;
    }
    unsigned char *bytes = malloc(len > 0 ? len : 1);
    if (!bytes || read_exact(STDIN_FILENO, bytes, len) != 1) {
      fprintf(stderr, "heif-decode: could not read a request of %u bytes\n", len);
      return EXIT_FAILED;
    }
    pid_t child = fork();
    if (child < 0) {
      fprintf(stderr, "heif-decode: fork failed: %s\n", strerror(errno));
      return EXIT_FAILED;
    }
    if (child == 0) {
      /* Ends with the server (which the parent kills at a timeout), never outlives it. */
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != server) _exit(EXIT_FAILED);
      close(STDIN_FILENO);
      _exit(decode(bytes, len, max_pixels, (int)threads));
    }
    free(bytes);
    int status;
    while (waitpid(child, &status, 0) < 0) {
      if (errno != EINTR) return EXIT_FAILED;
    }
    int32_t ended = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    unsigned char code[4];
    put_u32(code, (uint32_t)ended);
    frame('X', code, sizeof code);
  }
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--version") == 0) {
    printf("heif-decode protocol %d libheif %s\n", PROTOCOL, heif_get_version());
    return 0;
  }
  if (argc == 2 && strcmp(argv[1], "--serve") == 0) return serve();
  fprintf(stderr, "usage: heif-decode --serve | --version\n");
  return EXIT_FAILED;
}
