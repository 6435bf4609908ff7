"""The dashboard's Switchyard section: each known gateway's live traffic split and tokens/s."""
