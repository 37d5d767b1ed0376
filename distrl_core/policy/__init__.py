"""distrl_core/policy"""
