/* The tuner's rules: NCCL's example-tuner CSV format, parsed and matched.
 *
 * One rule per line:
 *   coll,min_bytes,max_bytes,algo,proto,channels,nNodes,nRanks[,numPipeOps[,regBuff]]
 * '#' comment lines and blank lines are skipped, fields are trimmed of spaces and tabs.
 * Unknown names take NCCL's example defaults (coll: allreduce, algo: ring, proto: simple) and a
 * line with anything doubtful gets exactly one warning naming the source and line number; lines
 * that cannot be parsed (field count, numbers, min > max) are skipped.
 *
 * The parser and the matcher are pure (no I/O, no globals); braid_rules_load is the only
 * function that touches the file system. */
#ifndef BRAID_TUNER_RULES_H
#define BRAID_TUNER_RULES_H

#include <stddef.h>
#include <stdint.h>

#define BRAID_RULE_ANY (-1)
/* NCCL's example reads lines into a 256-byte buffer; longer lines are warned about. */
#define BRAID_RULE_LINE_MAX 255

struct braid_rule {
  int coll;                 /* ncclFunc_t, 0..4 */
  uint64_t min_bytes;       /* inclusive */
  uint64_t max_bytes;       /* inclusive */
  int algo;                 /* NCCL_ALGO_* */
  int proto;                /* NCCL_PROTO_* */
  int channels;             /* -1: keep NCCL's count */
  int nnodes, nranks;       /* -1: any */
  int pipe_ops;             /* -1: any */
  int reg_buff;             /* -1: any, else 0 or 1 */
  int line;                 /* line number in its source, from 1 */
};

struct braid_rules {
  struct braid_rule *v;
  size_t n;
};

/* What a collective looks like to the matcher; -1 in pipe_ops/reg_buff means "not known"
 * (older ABI versions), which only rules with -1 in that field match. */
struct braid_rule_query {
  int coll;
  uint64_t nbytes;
  int nnodes, nranks;
  int pipe_ops;
  int reg_buff;
};

/* Receives each warning (line is the 1-based line number); NULL sends them to BRAID_WARN as
 * "<source>:<line>: <msg>". */
typedef void (*braid_rules_warn_fn)(void *arg, const char *source, int line, const char *msg);

/* Parses len bytes of text (need not be NUL-terminated) into out (replacing nothing: out must
 * be empty). Returns the number of warnings, or -1 when memory ran out (out is then empty). */
int braid_rules_parse(const char *text, size_t len, const char *source, struct braid_rules *out,
                      braid_rules_warn_fn warn, void *warn_arg);

/* Reads path and parses it. A missing file gives no rules and no warning; an unreadable one
 * gives no rules and one warning. Returns the number of warnings, -1 when memory ran out. */
int braid_rules_load(const char *path, struct braid_rules *out, braid_rules_warn_fn warn,
                     void *warn_arg);

/* The first rule that matches q, or NULL. */
const struct braid_rule *braid_rules_match(const struct braid_rules *r,
                                           const struct braid_rule_query *q);

void braid_rules_free(struct braid_rules *r);

/* Names as in the CSV ("?" for out-of-range values). */
const char *braid_rule_coll_name(int coll);
const char *braid_rule_algo_name(int algo);
const char *braid_rule_proto_name(int proto);

#endif
