/*
 * RoCE oracle: rdma-core 56.1's own mlx5_create_ah run for an Ethernet port, with the two
 * calls that need a kernel answered here (linked with -Wl,--wrap): the GID type of the
 * source index (`ibv_query_gid_type`, which reads sysfs) and the neighbour lookup of the
 * destination MAC (`ibv_resolve_eth_l2_from_gid`, which asks netlink). Everything else,
 * the address vector's encoding of the port, rate, service level, GRH and UDP source port
 * included, is the provider's code. Also rdma-core's ibv_flow_label_to_udp_sport.
 */
#include <config.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <infiniband/driver.h>

#include "mlx5.h"

#include "roce.h"

/*
 * The answers are per thread: the test harness runs oracle tests on several threads at
 * once, and one test's answer must never reach another's mlx5_create_ah.
 */
static __thread uint8_t answer_mac[6];
static __thread enum ibv_gid_type_sysfs answer_type;

int __wrap_ibv_query_gid_type(struct ibv_context *context, uint8_t port_num,
			      unsigned int index, enum ibv_gid_type_sysfs *type);
int __wrap_ibv_query_gid_type(struct ibv_context *context, uint8_t port_num,
			      unsigned int index, enum ibv_gid_type_sysfs *type)
{
	(void)context;
	(void)port_num;
	(void)index;
	*type = answer_type;
	return 0;
}

int __wrap_ibv_resolve_eth_l2_from_gid(struct ibv_context *context,
				       struct ibv_ah_attr *attr,
				       uint8_t eth_mac[6], uint16_t *vid);
int __wrap_ibv_resolve_eth_l2_from_gid(struct ibv_context *context,
				       struct ibv_ah_attr *attr,
				       uint8_t eth_mac[6], uint16_t *vid)
{
	(void)context;
	(void)attr;
	memcpy(eth_mac, answer_mac, sizeof(answer_mac));
	if (vid)
		*vid = 0;
	return 0;
}

int ibgda_roce_create_ah(const struct ibgda_roce_ah *args, uint8_t av[48])
{
	struct mlx5_context *ctx;
	struct mlx5_pd *pd;
	struct ibv_ah_attr attr = {};
	struct ibv_ah *ah;
	int ret = 0;

	ctx = calloc(1, sizeof(*ctx));
	pd = calloc(1, sizeof(*pd));
	if (!ctx || !pd) {
		ret = -ENOMEM;
		goto out;
	}
	/* One Ethernet port; no kernel AH command (so the neighbour lookup runs). */
	ctx->num_ports = 1;
	ctx->cached_link_layer[0] = IBV_LINK_LAYER_ETHERNET;
	ctx->cached_port_flags[0] = 0;
	ctx->cmds_supp_uhw = 0;
	pd->ibv_pd.context = &ctx->ibv_ctx.context;
	memcpy(answer_mac, args->mac, sizeof(answer_mac));
	answer_type = args->roce_v2 ? IBV_GID_TYPE_SYSFS_ROCE_V2 : IBV_GID_TYPE_SYSFS_IB_ROCE_V1;

	attr.is_global = 1;
	attr.port_num = 1;
	attr.sl = args->sl;
	attr.static_rate = args->static_rate;
	memcpy(attr.grh.dgid.raw, args->dgid, sizeof(attr.grh.dgid.raw));
	attr.grh.flow_label = args->flow_label;
	attr.grh.sgid_index = args->sgid_index;
	attr.grh.hop_limit = args->hop_limit;
	attr.grh.traffic_class = args->traffic_class;
	ah = mlx5_create_ah(&pd->ibv_pd, &attr);
	if (!ah) {
		ret = errno ? -errno : -EINVAL;
		goto out;
	}
	memcpy(av, &to_mah(ah)->av, 48);
	pthread_mutex_destroy(&to_mah(ah)->mutex);
	mlx5_destroy_ah(ah);
out:
	free(pd);
	free(ctx);
	return ret;
}

uint16_t ibgda_roce_flow_label_to_udp_sport(uint32_t flow_label)
{
	return ibv_flow_label_to_udp_sport(flow_label);
}
