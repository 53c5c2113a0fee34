"""Creates the sandbox buckets on the S3 endpoint in AWS_ENDPOINT_URL (idempotent).

    python3 sandbox/s3_buckets.py [NAME[:unversioned] ...]

Default: `tidemark` (versioned, what the journal needs) and `tidemark-unversioned` (for the
tests that show a store failing the capability check).
"""
import os
import sys

import boto3
from botocore.exceptions import ClientError


def main(args):
    specs = args or ["tidemark", "tidemark-unversioned:unversioned"]
    s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"],
                      region_name=os.environ.get("AWS_REGION", "us-east-1"))
    for spec in specs:
        name, _, mode = spec.partition(":")
        try:
            s3.create_bucket(Bucket=name)
        except ClientError as e:
            if e.response["Error"]["Code"] not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                raise
        if mode != "unversioned":
            s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
        print(f"bucket {name} ({'unversioned' if mode == 'unversioned' else 'versioned'})", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
