"""The Topology tab: nodes, their fabric links with live rates, and what is wrong with them."""
