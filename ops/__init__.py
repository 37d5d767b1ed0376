"""Operations: the ``distrl`` command line (``cli*``), the embedded mode and the stack it starts
(``embedded``, ``up*``, ``postgres``, ``processes``), ``distrl demo``/``run``/``status`` and their
reports. The Prefect flows these commands run live in ``flows/``."""
