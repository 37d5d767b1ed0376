"""distrl_core/envs"""
