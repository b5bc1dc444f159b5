/*
 * heif-decode: decodes the primary image of HEIF files (iPhone HEICs) to 8-bit interleaved RGB with
 * the system's libheif (Debian's libheif1 with libde265). images/heic-native.ts keeps one of these
 * per decode slot; tools/scripts/heic-decoder.ts builds it.
 *
 *   heif-decode --version
 *   heif-decode --serve      (stdin: requests; stdout: pixels; fd 3: what happened)
 *
 * A request on stdin is "HDEC", the image's length, the decoding threads, what it wants and the
 * pixel limit (uint32, uint32, uint32, uint64, little-endian), then the image's bytes. What it wants:
 * 0 the primary image; 1 the primary image's embedded thumbnail that is fit to fingerprint it
 * (fingerprint_thumbnail, below), or exit status 5 without decoding anything when it has none.
 * The server
 * reads it, forks a child for it and waits for the child; it never parses image bytes itself.
 * The child decodes; only once the whole picture is decoded does it write to stdout: "RGB8", the
 * width and the height (uint32), then width × height × 3 bytes, row after row, upright (libheif
 * applies irot, imir and clap). Frames on fd 3, each a type byte, a uint32 length and the payload:
 *   'M' text           why the child refused the image or failed (written by the child)
 *   'X' int32 status   the child ended: its exit status, or minus the signal that ended it (the server)
 * Exit status: 0 decoded; 2 not a HEIF image that decodes whole (the image's fault); 3 it declares
 * more than the pixel limit; 4 it needs more memory than its declared size allows; 5 a thumbnail
 * was asked for and none fits; 1 anything else.
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
#define PROTOCOL 3

/* What a request wants decoded. */
enum { WANT_PRIMARY = 0, WANT_THUMBNAIL = 1 };

enum { EXIT_FAILED = 1, EXIT_INVALID = 2, EXIT_TOO_LARGE = 3, EXIT_MEMORY = 4, EXIT_NO_THUMBNAIL = 5 };

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

/*
 * A fingerprint (images/fingerprint.ts) is made from a 288×256 intermediate, box-averaged to 32×32
 * and 9×8 grids: it needs a few hundred pixels a side, not the 8.5 megapixels of an iPhone photo
 * that HEVC, which has no reduced-resolution decode, can only decode whole. An iPhone HEIC carries
 * a thumbnail of its picture (a 'thmb' item, up to 320 pixels a side); decoding it takes a few
 * milliseconds. It is taken only when it can only be the same picture, upright the same way:
 *   - at least MIN_THUMBNAIL_LONG pixels on its longer side and MIN_THUMBNAIL_SHORT on its shorter
 *     (an iPhone's is 320 × 240; docs/decisions.md, "The fingerprint of a HEIC", has the hash
 *     distances: within lookup's threshold at 320, not always at 240);
 *   - fewer pixels than the primary image (a "thumbnail" larger than its image is no thumbnail);
 *   - the primary image's proportions, to two pixels of rounding on either side (encoders round
 *     a side to an even number for 4:2:0 chroma: libheif makes 2566×3313 a 246×320 thumbnail, not
 *     247.8×320; a crop, or a thumbnail padded with bars, has other proportions);
 *   - the same rotation and mirroring (irot, imir) as the primary image, and no crop (clap) on
 *     either: libheif applies each item's own, so only then do both come out upright alike.
 *     libheif 1.15 does not say which an item has; they are read from the container below.
 * Without one, the child says so (EXIT_NO_THUMBNAIL) and the caller decodes the primary image in a
 * request of its own, which the vendor's work copy of the same photo shares (images/foreign-decode.ts).
 */
#define MIN_THUMBNAIL_LONG 320
#define MIN_THUMBNAIL_SHORT 128
#define MAX_THUMBNAILS 8
/* Rotations and mirrorings an item may carry that are compared; more makes the thumbnail unfit. */
#define MAX_TRANSFORMS 8
#define FOURCC(a, b, c, d) ((uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (uint32_t)(d))

static uint32_t be32(const unsigned char *at) {
  return (uint32_t)at[0] << 24 | (uint32_t)at[1] << 16 | (uint32_t)at[2] << 8 | (uint32_t)at[3];
}

/* An ISOBMFF box inside a byte range: the whole box and its body. */
struct box {
  uint32_t type;
  const unsigned char *whole;
  size_t whole_len;
  const unsigned char *body;
  size_t len;
};

/* The box at *at within data[0, len): 1 read (and *at moved past it), 0 none left, -1 malformed. */
static int read_box(const unsigned char *data, size_t len, size_t *at, struct box *box) {
  if (*at >= len) return 0;
  if (len - *at < 8) return -1;
  const unsigned char *p = data + *at;
  uint64_t size = be32(p);
  size_t header = 8;
  if (size == 1) {
    if (len - *at < 16) return -1;
    size = (uint64_t)be32(p + 8) << 32 | be32(p + 12);
    header = 16;
  } else if (size == 0) {
    size = len - *at;
  }
  if (size < header || size > len - *at) return -1;
  box->type = be32(p + 4);
  box->whole = p;
  box->whole_len = (size_t)size;
  box->body = p + header;
  box->len = (size_t)size - header;
  *at += (size_t)size;
  return 1;
}

/* The first box of `type` among the boxes in data[0, len): 1 found, 0 not (or malformed). */
static int find_box(const unsigned char *data, size_t len, uint32_t type, struct box *out) {
  size_t at = 0;
  struct box box;
  while (read_box(data, len, &at, &box) == 1) {
    if (box.type == type) {
      *out = box;
      return 1;
    }
  }
  return 0;
}

/* The index-th (from 1) property of ipco: 1 found, 0 not. */
static int ipco_property(const struct box *ipco, uint32_t index, struct box *out) {
  size_t at = 0;
  for (uint32_t i = 1; read_box(ipco->body, ipco->len, &at, out) == 1; i++) {
    if (i == index) return 1;
  }
  return 0;
}

/* An item's rotations and mirrorings, in the order its ipma entry lists them, and whether it is cropped. */
struct transforms {
  int count;
  int cropped;
  struct box boxes[MAX_TRANSFORMS];
};

/* Reads `item`'s transformative properties from the file's meta box: 0 read, -1 anything unexpected. */
static int item_transforms(const unsigned char *file, size_t len, uint32_t item, struct transforms *out) {
  memset(out, 0, sizeof *out);
  struct box meta = {0}, iprp, ipco;
  size_t at = 0;
  struct box top;
  int found_meta = 0;
  while (read_box(file, len, &at, &top) == 1) {
    if (top.type == FOURCC('m', 'e', 't', 'a')) {
      if (found_meta++) return -1;
      meta = top;
    }
  }
  /* meta is a full box: version and flags come before its children. */
  if (found_meta != 1 || meta.len < 4) return -1;
  if (!find_box(meta.body + 4, meta.len - 4, FOURCC('i', 'p', 'r', 'p'), &iprp)) return -1;
  if (!find_box(iprp.body, iprp.len, FOURCC('i', 'p', 'c', 'o'), &ipco)) return -1;
  int entries_for_item = 0;
  size_t in_iprp = 0;
  struct box ipma;
  while (read_box(iprp.body, iprp.len, &in_iprp, &ipma) == 1) {
    if (ipma.type != FOURCC('i', 'p', 'm', 'a')) continue;
    const unsigned char *p = ipma.body;
    const unsigned char *end = ipma.body + ipma.len;
    if (end - p < 8) return -1;
    int version = p[0];
    int wide_index = p[3] & 1;
    uint32_t entries = be32(p + 4);
    p += 8;
    for (uint32_t e = 0; e < entries; e++) {
      size_t id_bytes = version < 1 ? 2 : 4;
      if ((size_t)(end - p) < id_bytes + 1) return -1;
      uint32_t id = version < 1 ? (uint32_t)p[0] << 8 | p[1] : be32(p);
      p += id_bytes;
      int associations = *p++;
      size_t each = wide_index ? 2 : 1;
      if ((size_t)(end - p) < (size_t)associations * each) return -1;
      if (id == item) entries_for_item++;
      for (int a = 0; a < associations; a++, p += each) {
        if (id != item) continue;
        uint32_t index = wide_index ? ((uint32_t)p[0] << 8 | p[1]) & 0x7fff : p[0] & 0x7fu;
        struct box property;
        if (index == 0) continue;
        if (!ipco_property(&ipco, index, &property)) return -1;
        if (property.type == FOURCC('c', 'l', 'a', 'p')) out->cropped = 1;
        if (property.type != FOURCC('i', 'r', 'o', 't') && property.type != FOURCC('i', 'm', 'i', 'r')) continue;
        if (out->count == MAX_TRANSFORMS) return -1;
        out->boxes[out->count++] = property;
      }
    }
  }
  return entries_for_item == 1 ? 0 : -1;
}

/* Whether libheif turns both items upright alike: the same rotations and mirrorings, no crop. */
static int transformed_alike(const unsigned char *file, size_t len, uint32_t primary, uint32_t thumbnail) {
  struct transforms a, b;
  if (item_transforms(file, len, primary, &a) != 0 || item_transforms(file, len, thumbnail, &b) != 0) return 0;
  if (a.cropped || b.cropped || a.count != b.count) return 0;
  for (int i = 0; i < a.count; i++) {
    /* Compared by their bodies: the angle, or the axis. */
    if (a.boxes[i].type != b.boxes[i].type || a.boxes[i].len != b.boxes[i].len) return 0;
    if (memcmp(a.boxes[i].body, b.boxes[i].body, a.boxes[i].len) != 0) return 0;
  }
  return 1;
}

/* The largest thumbnail of the primary image that is fit to fingerprint it (above), or NULL. */
static struct heif_image_handle *fingerprint_thumbnail(struct heif_context *ctx, struct heif_image_handle *primary, const unsigned char *bytes, size_t len) {
  heif_item_id primary_id;
  if (heif_context_get_primary_image_ID(ctx, &primary_id).code != heif_error_Ok) return NULL;
  long long width = heif_image_handle_get_width(primary);
  long long height = heif_image_handle_get_height(primary);
  heif_item_id ids[MAX_THUMBNAILS];
  int n = heif_image_handle_get_list_of_thumbnail_IDs(primary, ids, MAX_THUMBNAILS);
  struct heif_image_handle *best = NULL;
  long long best_pixels = 0;
  for (int i = 0; i < n; i++) {
    struct heif_image_handle *thumbnail;
    if (heif_image_handle_get_thumbnail(primary, ids[i], &thumbnail).code != heif_error_Ok) continue;
    long long w = heif_image_handle_get_width(thumbnail);
    long long h = heif_image_handle_get_height(thumbnail);
    /* Scaled from width × height, each side rounded by up to two pixels: |w·height − h·width| ≤ 2·(width + height). */
    long long skew = w * height - h * width;
    int fit = w > 0 && h > 0 && (w < h ? w : h) >= MIN_THUMBNAIL_SHORT && (w > h ? w : h) >= MIN_THUMBNAIL_LONG && w * h < width * height && w * h > best_pixels &&
              (skew < 0 ? -skew : skew) <= 2 * (width + height) && transformed_alike(bytes, len, primary_id, ids[i]);
    if (fit) {
      if (best) heif_image_handle_release(best);
      best = thumbnail;
      best_pixels = w * h;
    } else {
      heif_image_handle_release(thumbnail);
    }
  }
  return best;
}

/* The child's work: one image. Returns its exit status. */
static int decode(const unsigned char *bytes, size_t len, unsigned long long max_pixels, int threads, int want) {
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
  if (want == WANT_THUMBNAIL) {
    struct heif_image_handle *thumbnail = fingerprint_thumbnail(ctx, handle, bytes, len);
    if (!thumbnail) return refuse(EXIT_NO_THUMBNAIL, "HEIF has no thumbnail fit to fingerprint it");
    /* From here on, the thumbnail is the image: its declared size caps the memory and must be what decodes. */
    handle = thumbnail;
    width = heif_image_handle_get_width(handle);
    height = heif_image_handle_get_height(handle);
    pixels = (unsigned long long)width * (unsigned long long)height;
  }
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
    uint32_t want = get_u32(request + 12);
    unsigned long long max_pixels = (unsigned long long)get_u32(request + 16) | (unsigned long long)get_u32(request + 20) << 32;
    if (len > MAX_INPUT_BYTES || threads > MAX_THREADS || want > WANT_THUMBNAIL || max_pixels == 0) {
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
      _exit(decode(bytes, len, max_pixels, (int)threads, (int)want));
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
