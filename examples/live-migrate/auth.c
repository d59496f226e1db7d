// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Who may talk to a destination: a peer that proves it holds the shared key.
 * Every connection opens with the destination's CHALLENGE (a fresh nonce);
 * the source answers with AUTH, a MAC (libsodium's crypto_auth,
 * HMAC-SHA-512-256) over that nonce, its own nonce, the connection's kind,
 * its flags and its session; the destination checks it in constant time
 * before it reads anything else, and proves the key back with AUTH_OK.  Only
 * then does the source say anything of substance: its HELLO is the first
 * sealed frame (encrypted and authenticated under a key of this connection:
 * proto.c), and the destination's answer -- ADMIT, or why not -- the first
 * sealed frame back.  So a source never tells a stranger what it migrates,
 * and nothing a stranger says after AUTH can pass for the destination's word.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sodium.h>

#include "lm.h"

int lm_crypto_init(void)
{
	return sodium_init() < 0 ? -EIO : 0;
}

void lm_key_generate(uint8_t key[LM_KEYLEN])
{
	crypto_auth_keygen(key);
}

void lm_key_hex(const uint8_t key[LM_KEYLEN], char hex[2 * LM_KEYLEN + 1])
{
	sodium_bin2hex(hex, 2 * LM_KEYLEN + 1, key, LM_KEYLEN);
}

int lm_key_load(const char *path, uint8_t key[LM_KEYLEN], char *err, size_t errlen)
{
	char buf[256];
	size_t bin = 0;
	const char *end;
	struct stat st;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		snprintf(err, errlen, "cannot read the key file %s: %s", path, strerror(errno));
		return -errno;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	if (!fstat(fd, &st) && (st.st_mode & 077))
		fprintf(stderr, "lm: warning: the key file %s is readable by others "
			"(chmod 600 it)\n", path);
	close(fd);
	if (n < 0) {
		snprintf(err, errlen, "cannot read the key file %s: %s", path, strerror(errno));
		return -EIO;
	}
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
		n--;
	buf[n] = 0;
	if (n != 2 * LM_KEYLEN ||
	    sodium_hex2bin(key, LM_KEYLEN, buf, (size_t)n, NULL, &bin, &end) || bin != LM_KEYLEN ||
	    *end) {
		snprintf(err, errlen, "the key file %s does not hold a key: it needs %d hex digits "
			 "(make one with 'lm keygen FILE')", path, 2 * LM_KEYLEN);
		return -EINVAL;
	}
	return 0;
}

int lm_key_write(const char *path, const uint8_t key[LM_KEYLEN])
{
	char hex[2 * LM_KEYLEN + 2];
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ssize_t n;

	if (fd < 0)
		return -errno;
	lm_key_hex(key, hex);
	strcat(hex, "\n");
	n = write(fd, hex, strlen(hex));
	if (close(fd) || n != (ssize_t)strlen(hex))
		return -EIO;
	return 0;
}

/*
 * The handshake's MAC, keyed with the shared key: a label naming the
 * direction, then everything both ends must agree on -- the CHALLENGE
 * whole (its version, its verify and plaintext flags too), the connection's
 * kind and flags, the session and the source's nonce -- so the network can
 * change none of it, nor turn --verify or encryption off.
 */
static void hs_mac(uint8_t out[LM_MACLEN], const uint8_t *key, const char *label,
		   const struct lm_challenge *ch, const struct lm_auth *a)
{
	crypto_auth_hmacsha512256_state st;

	crypto_auth_hmacsha512256_init(&st, key, LM_KEYLEN);
	crypto_auth_hmacsha512256_update(&st, (const uint8_t *)label, strlen(label) + 1);
	crypto_auth_hmacsha512256_update(&st, (const uint8_t *)ch, sizeof(*ch));
	/* kind, flags, session, nonce: AUTH but its MAC */
	crypto_auth_hmacsha512256_update(&st, (const uint8_t *)a, offsetof(struct lm_auth, mac));
	crypto_auth_hmacsha512256_final(&st, out);
}

static void src_mac(uint8_t out[LM_MACLEN], const uint8_t *key, const struct lm_challenge *ch,
		    const struct lm_auth *a)
{
	hs_mac(out, key, "lm-auth-5 source", ch, a);
}

static void dst_mac(uint8_t out[LM_MACLEN], const uint8_t *key, const struct lm_challenge *ch,
		    const struct lm_auth *a)
{
	hs_mac(out, key, "lm-auth-5 destination", ch, a);
}

void lm_auth_sign(struct lm_auth *a, const uint8_t *key, const struct lm_challenge *ch)
{
	src_mac(a->mac, key, ch, a);
}

bool lm_auth_plain(const struct lm_challenge *ch, const struct lm_auth *a)
{
	return (ch->flags & LM_CHAL_PLAIN) && (a->flags & LM_AUTH_PLAIN);
}

void lm_conn_key(struct lm_sealkey *out, const uint8_t *key, const struct lm_challenge *ch,
		 const struct lm_auth *a)
{
	crypto_generichash_state st;
	static const char label[] = "lm-conn-5";

	crypto_generichash_init(&st, key, LM_KEYLEN, sizeof(out->k));
	crypto_generichash_update(&st, (const uint8_t *)label, sizeof(label));
	crypto_generichash_update(&st, (const uint8_t *)ch, sizeof(*ch));
	crypto_generichash_update(&st, (const uint8_t *)a, offsetof(struct lm_auth, mac));
	crypto_generichash_final(&st, out->k, sizeof(out->k));
	out->plain = lm_auth_plain(ch, a);
}

void lm_verify_key(uint8_t out[16], const uint8_t *key, const uint8_t session[LM_SESSION])
{
	static const char label[] = "lm-verify-4";
	crypto_generichash_state st;

	crypto_generichash_init(&st, key, LM_KEYLEN, 16);
	crypto_generichash_update(&st, (const uint8_t *)label, sizeof(label));
	crypto_generichash_update(&st, session, LM_SESSION);
	crypto_generichash_final(&st, out, 16);
}

uint64_t lm_page_hash(const uint8_t vkey[16], const void *p, size_t n)
{
	uint8_t h[crypto_shorthash_BYTES];
	uint64_t v;

	crypto_shorthash(h, p, n, vkey);
	memcpy(&v, h, sizeof(v));
	return v;
}

static const struct lm_geom no_geom;

static int refused(struct lm_conn *c, const struct lm_refuse *r)
{
	switch (r->why) {
	case LM_REFUSE_KEY:
		snprintf(c->err, sizeof(c->err), "the destination refused our key: give both "
			 "ends the same --key file (or the key 'lm dest' printed)");
		return -EACCES;
	case LM_REFUSE_BUSY:
		snprintf(c->err, sizeof(c->err), "the destination is busy with another "
			 "migration");
		return -EBUSY;
	case LM_REFUSE_SIZE:
		snprintf(c->err, sizeof(c->err), "the destination takes at most %llu bytes "
			 "(%s); this region is larger", (unsigned long long)r->max_size,
			 lm_limit_name(r->mode));
		return -EFBIG;
	case LM_REFUSE_MODE:
		snprintf(c->err, sizeof(c->err), "the destination runs --mode %s",
			 lm_mode_name(r->mode));
		return -EINVAL;
	case LM_REFUSE_FINISHED:
		snprintf(c->err, sizeof(c->err), "the destination had finished: its FIN was lost; "
			 "its verdict came with the refusal");
		return -EALREADY;
	case LM_REFUSE_NOT_RESUMED:
		snprintf(c->err, sizeof(c->err), "the destination did not resume the workload "
			 "and never will: it is the source's again");
		return -ENOLINK;
	default:
		snprintf(c->err, sizeof(c->err), "the destination has no migration to rejoin "
			 "(session unknown or over)");
		return -ESRCH;
	}
}

/*
 * A frame of type want, or REFUSE turned into its -errno.  Before the
 * destination proved the key nothing it says is authentic: only a KEY
 * refusal is taken (a destination cannot seal for a peer it failed to
 * authenticate); any other is ignored as not its word (-EKEYREJECTED).
 */
static int recv_or_refuse(struct lm_conn *c, const struct lm_geom *g, unsigned int want,
			  struct lm_frame *f)
{
	int ret = lm_recv(c, g, f);

	if (ret)
		return ret;
	if (f->h.type == LM_REFUSE && !c->sealed &&
	    ((const struct lm_refuse *)f->fixed)->why != LM_REFUSE_KEY) {
		snprintf(c->err, sizeof(c->err), "%s connection: a refusal before the destination "
			 "proved the key: not its word, ignored", c->name);
		return -EKEYREJECTED;
	}
	if (f->h.type == LM_REFUSE)
		return refused(c, f->fixed);
	if (f->h.type != want) {
		snprintf(c->err, sizeof(c->err), "%s connection: expected %s, got %s", c->name,
			 lm_type_name(want), lm_type_name(f->h.type));
		return c->sealed ? -EBADMSG : -EKEYREJECTED;
	}
	return 0;
}

int lm_auth_client(struct lm_conn *c, const uint8_t *key, unsigned int kind, unsigned int flags,
		   const uint8_t session[LM_SESSION], const struct lm_geom *g,
		   struct lm_hello *hello, struct lm_fin *fin)
{
	const struct lm_geom *gg = g ? g : &no_geom;
	struct lm_auth a = { .kind = kind, .flags = flags };
	struct lm_challenge ch;
	struct lm_sealkey sk;
	uint8_t want[LM_MACLEN];
	struct lm_frame f;
	int ret;

	ret = recv_or_refuse(c, gg, LM_CHALLENGE, &f);
	if (ret)
		return ret;
	ch = *(const struct lm_challenge *)f.fixed;
	/* the destination may ask for verification too: HELLO says what we do */
	if (ch.flags & LM_CHAL_VERIFY)
		hello->verify = 1;
	memcpy(a.session, session, LM_SESSION);
	randombytes_buf(a.nonce, LM_NONCE);
	lm_auth_sign(&a, key, &ch);
	ret = lm_send(c, LM_AUTH, 0, &a, NULL, 0);
	if (!ret)
		ret = recv_or_refuse(c, gg, LM_AUTH_OK, &f);
	if (ret)
		return ret;
	dst_mac(want, key, &ch, &a);
	if (sodium_memcmp(want, ((const struct lm_auth_ok *)f.fixed)->mac, LM_MACLEN)) {
		snprintf(c->err, sizeof(c->err), "the destination did not prove the key: this "
			 "is not our destination");
		return -EACCES;
	}
	/* from here on every frame is sealed under this connection's key */
	lm_conn_key(&sk, key, &ch, &a);
	lm_conn_seal(c, &sk, true, 0);
	sodium_memzero(&sk, sizeof(sk));
	hello->version = LM_VERSION;
	ret = lm_send(c, LM_HELLO, kind == LM_AUTH_URGENT || kind == LM_AUTH_REJOIN_URGENT ?
		      LM_F_URGENT : 0, hello, NULL, 0);
	if (!ret)
		ret = recv_or_refuse(c, gg, LM_ADMIT, &f);
	/* sealed, so the destination's word: the verdict a lost FIN carried */
	if (ret == -EALREADY && fin)
		*fin = ((const struct lm_refuse *)f.fixed)->fin;
	return ret;
}

bool lm_auth_answered(const struct lm_conn *c, int ret)
{
	if (!c->sealed || ret == -EKEYREJECTED)
		return false;
	return ret == -EACCES || ret == -ESRCH || ret == -ENOLINK || ret == -EALREADY ||
	       ret == -EBUSY || ret == -EFBIG || ret == -EINVAL || lm_err_is_protocol(ret);
}

int lm_auth_check(const uint8_t *key, const struct lm_challenge *ch, const struct lm_auth *a)
{
	uint8_t want[LM_MACLEN];

	src_mac(want, key, ch, a);
	return sodium_memcmp(want, a->mac, LM_MACLEN) ? -EACCES : 0;
}

void lm_auth_ok_make(struct lm_auth_ok *ok, const uint8_t *key, const struct lm_challenge *ch,
		     const struct lm_auth *a)
{
	dst_mac(ok->mac, key, ch, a);
}
