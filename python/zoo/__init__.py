"""The model zoo (issue #13): architectures built from small configs with seeded random
weights (nothing downloaded), each run by torch CPU and by Tessera, with a report.

    python -m zoo.run [--models NAME ...] [--modes ...] [--out DIR]   (from python/)
"""
