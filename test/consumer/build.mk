# net-consumer (test/consumer): drives a net plugin as NCCL's other consumers do (test/consumer/run.sh).
CONSUMER = $(BUILD)/net-consumer
TARGETS += $(CONSUMER)

$(CONSUMER): $(call obj,test/consumer/consumer.c $(NETLOAD_SRCS) common/log.c common/param.c common/dynlib.c common/sodium_lib.c common/tmpfile.c common/sockaddr.c)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)
