/* SPDX-License-Identifier: GPL-2.0 */
/* node.c: the cards' character devices (both builds). */
#ifndef PEVB_NODE_H
#define PEVB_NODE_H

struct device;
struct file_operations;
struct pevb_node;

int pevb_nodes_init(void);
void pevb_nodes_exit(void);
int pevb_node_add(struct device *parent, unsigned int index, const struct file_operations *fops, void *private,
		  struct pevb_node **out);
void pevb_node_del(struct pevb_node *n);

#endif
