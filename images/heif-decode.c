/*
 * heif-decode: the primary image of one HEIF file (an iPhone HEIC) to 8-bit interleaved RGB, with
 * the system's libheif (Debian's libheif1 with libde265). images/heic-native.ts starts one of these
 * per image and ends it after; tools/scripts/heic-decoder.ts builds it.
 *
 *   heif-decode MAX_PIXELS THREADS < image > pixels
 *   heif-decode --version
 *
 * On success stdout is "RGB8", the width and the height (uint32, little-endian), then
 * width × height × 3 bytes, row after row, upright (libheif applies irot, imir and clap).
 * Exit status: 2 the file is not a HEIF image that decodes whole (the image's fault), 3 it declares
 * more than MAX_PIXELS pixels, 4 decoding it needs more memory than its declared size allows,
 * 1 anything else (usage, I/O). One line on stderr says why.
 *
 * A process of its own, so that whatever a hostile file does to the decoder (a crash, a hang, a
 * runaway allocation) ends this process, not the server: the parent kills it after its timeout,
 * and its data segment is capped from the declared size before a pixel is decoded.
 */
#define _GNU_SOURCE /* pthread_setattr_default_np */
#include <libheif/heif.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* Bumped whenever the arguments or the output change; images/heic-native.ts checks it. */
#define PROTOCOL 1

enum { EXIT_FAILED = 1, EXIT_INVALID = 2, EXIT_TOO_LARGE = 3, EXIT_MEMORY = 4 };

/* Decoding threads the caller may ask for. */
#define MAX_THREADS 16

/** No image we accept comes near this; a parent that sends more is broken. */
#define MAX_INPUT_BYTES ((size_t)1 << 30)

static int fail(int status, const char *format, const char *detail) {
  fprintf(stderr, format, detail);
  fputc('\n', stderr);
  return status;
}

static int read_all(unsigned char **out, size_t *out_len) {
  size_t cap = 1 << 20, len = 0;
  unsigned char *buf = malloc(cap);
  if (!buf) return -1;
  for (;;) {
    if (len == cap) {
      if (cap >= MAX_INPUT_BYTES) return -1;
      unsigned char *grown = realloc(buf, cap * 2);
      if (!grown) return -1;
      buf = grown;
      cap *= 2;
    }
    ssize_t n = read(STDIN_FILENO, buf + len, cap - len);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    len += (size_t)n;
  }
  *out = buf;
  *out_len = len;
  return 0;
}

static int write_all(const void *data, size_t len) {
  const unsigned char *p = data;
  while (len > 0) {
    ssize_t n = write(STDOUT_FILENO, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
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
  pthread_attr_destroy(&attr);
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

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--version") == 0) {
    printf("heif-decode protocol %d libheif %s\n", PROTOCOL, heif_get_version());
    return 0;
  }
  if (argc != 3) return fail(EXIT_FAILED, "usage: heif-decode MAX_PIXELS THREADS < image > pixels%s", "");
  char *end;
  unsigned long long max_pixels = strtoull(argv[1], &end, 10);
  if (*end || max_pixels == 0) return fail(EXIT_FAILED, "bad MAX_PIXELS: %s", argv[1]);
  long threads = strtol(argv[2], &end, 10);
  if (*end || threads < 0 || threads > MAX_THREADS) return fail(EXIT_FAILED, "bad THREADS: %s", argv[2]);

  unsigned char *bytes;
  size_t len;
  if (read_all(&bytes, &len) != 0) return fail(EXIT_FAILED, "could not read the image from stdin%s", "");

  struct heif_context *ctx = heif_context_alloc();
  if (!ctx) return fail(EXIT_FAILED, "libheif could not start%s", "");
  heif_context_set_max_decoding_threads(ctx, (int)threads);
  struct heif_error err = heif_context_read_from_memory_without_copy(ctx, bytes, len, NULL);
  if (err.subcode == heif_suberror_End_of_data) return fail(EXIT_INVALID, "Image is corrupt or truncated: %s", err.message);
  if (err.code != heif_error_Ok) return fail(EXIT_INVALID, "HEIF could not be read: %s", err.message);

  struct heif_image_handle *handle;
  err = heif_context_get_primary_image_handle(ctx, &handle);
  if (err.code != heif_error_Ok) return fail(EXIT_INVALID, "HEIF has no readable image: %s", err.message);
  /* Declared size after libheif's own transformations (rotation, mirroring, crop): checked before a pixel is decoded. */
  int width = heif_image_handle_get_width(handle);
  int height = heif_image_handle_get_height(handle);
  if (width <= 0 || height <= 0) return fail(EXIT_INVALID, "HEIF image has no dimensions%s", "");
  unsigned long long pixels = (unsigned long long)width * (unsigned long long)height;
  if (pixels > max_pixels) {
    fprintf(stderr, "Image is %d×%d (%llu pixels), over the %llu-pixel limit\n", width, height, pixels, max_pixels);
    return EXIT_TOO_LARGE;
  }
  if (cap_memory(pixels, (int)threads) != 0) return fail(EXIT_FAILED, "could not cap the decoder's memory%s", "");

  struct heif_decoding_options *options = heif_decoding_options_alloc();
  if (options->version >= 2) options->convert_hdr_to_8bit = 1;
  /* Missing or damaged tiles are an error, not grey pixels and a warning. */
  if (options->version >= 3) options->strict_decoding = 1;
  struct heif_image *image;
  err = heif_decode_image(handle, &image, heif_colorspace_RGB, heif_chroma_interleaved_RGB, options);
  heif_decoding_options_free(options);
  if (err.code == heif_error_Memory_allocation_error) {
    return fail(EXIT_MEMORY, "Image needs more memory than its declared size allows to decode (%s); refused as malformed", err.message);
  }
  if (err.subcode == heif_suberror_End_of_data) return fail(EXIT_INVALID, "Image is corrupt or truncated: %s", err.message);
  if (err.code != heif_error_Ok) return fail(EXIT_INVALID, "HEIF could not be decoded: %s", err.message);
  /* Belt and braces: a lenient decode would have filled what it could not decode with grey. */
  int warnings = heif_image_get_decoding_warnings(image, 0, NULL, 0);
  if (warnings > 0) {
    fprintf(stderr, "Image is corrupt or truncated: %d part(s) of the HEIF could not be decoded\n", warnings);
    return EXIT_INVALID;
  }
  int stride;
  const uint8_t *plane = heif_image_get_plane_readonly(image, heif_channel_interleaved, &stride);
  int plane_width = heif_image_get_width(image, heif_channel_interleaved);
  int plane_height = heif_image_get_height(image, heif_channel_interleaved);
  if (!plane || heif_image_get_bits_per_pixel(image, heif_channel_interleaved) != 24) {
    return fail(EXIT_INVALID, "HEIF decoded without an 8-bit RGB plane%s", "");
  }
  /* libheif 1.15 does not compare the decoded size with the declared one (later versions do). */
  if (plane_width != width || plane_height != height) {
    fprintf(stderr, "HEIF could not be decoded: Decoded image does not have the size signaled in the file (%d×%d, declared %d×%d)\n", plane_width, plane_height, width, height);
    return EXIT_INVALID;
  }

  unsigned char header[12] = {'R', 'G', 'B', '8'};
  for (int i = 0; i < 4; i++) {
    header[4 + i] = (unsigned char)((unsigned)width >> (8 * i));
    header[8 + i] = (unsigned char)((unsigned)height >> (8 * i));
  }
  if (write_all(header, sizeof header) != 0) return fail(EXIT_FAILED, "could not write the pixels%s", "");
  size_t row = (size_t)width * 3;
  for (int y = 0; y < height; y++) {
    if (write_all(plane + (size_t)y * (size_t)stride, row) != 0) return fail(EXIT_FAILED, "could not write the pixels%s", "");
  }
  /* The process ends here: the kernel frees the image, the context and the input at once. */
  return 0;
}
