/*
 * SCTP over UDP for srsenb and srsepc on a kernel without SCTP (test rig only; a lab kernel has SCTP).
 *
 * LD_PRELOAD'ed into both programs. socket(AF_INET, SOCK_SEQPACKET, IPPROTO_SCTP) becomes a UDP socket;
 * SCTP-level socket options are accepted and ignored (getsockopt returns zeros); listen() on such a socket
 * succeeds; sctp_sendmsg/sctp_send/sctp_recvmsg (the lksctp-tools calls srsRAN 4G makes) become
 * sendto/recvfrom with stream 0. One S1 association per socket is all srsenb and srsepc need: the peer a
 * listening socket last heard from is where sctp_send() answers. Each S1AP message is one datagram
 * (SCTP preserves message boundaries, as UDP does). No retransmission: the veth/loopback between the
 * eNodeB and the EPC does not lose packets.
 *
 * Build: cc -shared -fPIC -O2 -o sctp_over_udp.so sctp_over_udp.c -ldl (rigs/sctpshim.py).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>

#ifndef IPPROTO_SCTP
#define IPPROTO_SCTP 132
#endif
#define MAX_FD 4096

struct sctp_sndrcvinfo_compat { /* layout of struct sctp_sndrcvinfo (linux/sctp.h) */
  unsigned short sinfo_stream;
  unsigned short sinfo_ssn;
  unsigned short sinfo_flags;
  unsigned int sinfo_ppid;
  unsigned int sinfo_context;
  unsigned int sinfo_timetolive;
  unsigned int sinfo_tsn;
  unsigned int sinfo_cumtsn;
  int sinfo_assoc_id;
};

static unsigned char shimmed[MAX_FD];
static struct sockaddr_storage peer[MAX_FD];
static socklen_t peer_len[MAX_FD];

static int is_shim(int fd) { return fd >= 0 && fd < MAX_FD && shimmed[fd]; }

int socket(int domain, int type, int protocol)
{
  static int (*real)(int, int, int);
  if (!real) real = dlsym(RTLD_NEXT, "socket");
  if (protocol == IPPROTO_SCTP && (domain == AF_INET || domain == AF_INET6)) {
    int fd = real(domain, SOCK_DGRAM | (type & (SOCK_NONBLOCK | SOCK_CLOEXEC)), IPPROTO_UDP);
    if (fd >= 0 && fd < MAX_FD) {
      shimmed[fd] = 1;
      peer_len[fd] = 0;
    }
    return fd;
  }
  return real(domain, type, protocol);
}

int close(int fd)
{
  static int (*real)(int);
  if (!real) real = dlsym(RTLD_NEXT, "close");
  if (fd >= 0 && fd < MAX_FD) shimmed[fd] = 0;
  return real(fd);
}

int setsockopt(int fd, int level, int name, const void* val, socklen_t len)
{
  static int (*real)(int, int, int, const void*, socklen_t);
  if (!real) real = dlsym(RTLD_NEXT, "setsockopt");
  if (is_shim(fd) && level == IPPROTO_SCTP) return 0;
  return real(fd, level, name, val, len);
}

int getsockopt(int fd, int level, int name, void* val, socklen_t* len)
{
  static int (*real)(int, int, int, void*, socklen_t*);
  if (!real) real = dlsym(RTLD_NEXT, "getsockopt");
  if (is_shim(fd) && level == IPPROTO_SCTP) {
    memset(val, 0, *len);
    return 0;
  }
  return real(fd, level, name, val, len);
}

int listen(int fd, int backlog)
{
  static int (*real)(int, int);
  if (!real) real = dlsym(RTLD_NEXT, "listen");
  if (is_shim(fd)) return 0;
  return real(fd, backlog);
}

int connect(int fd, const struct sockaddr* addr, socklen_t len)
{
  static int (*real)(int, const struct sockaddr*, socklen_t);
  if (!real) real = dlsym(RTLD_NEXT, "connect");
  if (is_shim(fd) && len <= sizeof(struct sockaddr_storage)) {
    memcpy(&peer[fd], addr, len);
    peer_len[fd] = len;
  }
  return real(fd, addr, len);
}

int sctp_sendmsg(int fd, const void* msg, size_t len, struct sockaddr* to, socklen_t tolen, unsigned int ppid,
                 unsigned int flags, unsigned short stream, unsigned int ttl, unsigned int context)
{
  (void)ppid; (void)flags; (void)stream; (void)ttl; (void)context;
  if (to != NULL && tolen > 0 && peer_len[fd] == 0) return sendto(fd, msg, len, MSG_NOSIGNAL, to, tolen);
  if (peer_len[fd] > 0) return sendto(fd, msg, len, MSG_NOSIGNAL, (struct sockaddr*)&peer[fd], peer_len[fd]);
  errno = ENOTCONN;
  return -1;
}

int sctp_send(int fd, const void* msg, size_t len, const struct sctp_sndrcvinfo_compat* sinfo, int flags)
{
  (void)sinfo; (void)flags;
  if (peer_len[fd] == 0) {
    errno = ENOTCONN;
    return -1;
  }
  return sendto(fd, msg, len, MSG_NOSIGNAL, (struct sockaddr*)&peer[fd], peer_len[fd]);
}

int sctp_recvmsg(int fd, void* msg, size_t len, struct sockaddr* from, socklen_t* fromlen,
                 struct sctp_sndrcvinfo_compat* sinfo, int* msg_flags)
{
  struct sockaddr_storage src;
  socklen_t srclen = sizeof(src);
  ssize_t n = recvfrom(fd, msg, len, 0, (struct sockaddr*)&src, &srclen);
  if (n < 0) return -1;
  /* answer whoever spoke last (one association per socket) */
  memcpy(&peer[fd], &src, srclen);
  peer_len[fd] = srclen;
  if (from != NULL && fromlen != NULL) {
    socklen_t l = *fromlen < srclen ? *fromlen : srclen;
    memcpy(from, &src, l);
    *fromlen = srclen;
  }
  if (sinfo != NULL) {
    memset(sinfo, 0, sizeof(*sinfo));
    sinfo->sinfo_ppid = htonl(18); /* S1AP */
    sinfo->sinfo_assoc_id = 1;
  }
  if (msg_flags != NULL) *msg_flags = MSG_EOR;
  return (int)n;
}
