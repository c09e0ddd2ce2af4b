"""The S3 flags that bucket_queries.py and query_node_start.py share, and the strata flags they
become. Without --s3-url the scripts use a file:// bucket."""


def add_s3_args(ap):
    """Adds --s3-url, --s3-endpoint, --s3-region, --s3-key-id and --s3-secret-file to `ap`."""
    ap.add_argument("--s3-url", help="s3://BUCKET/PREFIX; a file:// directory when absent")
    ap.add_argument("--s3-endpoint")
    ap.add_argument("--s3-region", default="us-east-1")
    ap.add_argument("--s3-key-id")
    ap.add_argument("--s3-secret-file")


def bucket_args(url, a):
    """strata's flags for the bucket at `url`, with the S3 endpoint and credentials of `a`."""
    args = ["--storage.bucket", url]
    if a.s3_url:
        args += ["--storage.bucket-endpoint", a.s3_endpoint, "--storage.bucket-region", a.s3_region,
                 "--storage.bucket-access-key-id", a.s3_key_id,
                 "--storage.bucket-secret-access-key-file", a.s3_secret_file]
    return args
