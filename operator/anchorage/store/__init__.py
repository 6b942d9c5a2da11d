"""Artifact stores: file:// and s3:// behind one interface (the only package that imports boto3)."""
