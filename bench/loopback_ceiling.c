// What any server can deliver to curl over this machine's loopback: a minimal HTTP/1.1 file
// server (one connection at a time) that sends the file with sendfile(2) or with read/write
// through one 2 MiB page-aligned buffer. bench/loopback_ceiling.sh builds and runs it; it sets
// the ceiling the single 256 MiB pull of the core bench is judged against (bench/README.md).
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static char buf[2 << 20] __attribute__((aligned(4096)));

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s <port> sendfile|rw <file>\n", argv[0]);
    return 2;
  }
  int rw = strcmp(argv[2], "rw") == 0;
  int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons(atoi(argv[1]));
  a.sin_addr.s_addr = htonl(0x7f000001);
  if (bind(s, (void *)&a, sizeof a) || listen(s, 16)) return perror("listen"), 1;
  for (;;) {
    int c = accept(s, 0, 0);
    if (c < 0) continue;
    char req[8192];
    if (read(c, req, sizeof req) <= 0) { close(c); continue; }
    int f = open(argv[3], O_RDONLY);
    struct stat st;
    fstat(f, &st);
    char h[256];
    int hl = snprintf(h, sizeof h,
                      "HTTP/1.1 200 OK\r\nContent-Length: %lld\r\nConnection: close\r\n\r\n",
                      (long long)st.st_size);
    if (write(c, h, hl) != hl) { close(f); close(c); continue; }
    off_t left = st.st_size, off = 0;
    while (left > 0) {
      ssize_t k;
      if (!rw) {
        k = sendfile(c, f, &off, left);
      } else {
        k = read(f, buf, sizeof buf);
        for (ssize_t w = 0, x; k > 0 && w < k; w += x)
          if ((x = write(c, buf + w, k - w)) <= 0) { k = -1; break; }
      }
      if (k <= 0) break;
      left -= k;
    }
    close(f);
    close(c);
  }
}
