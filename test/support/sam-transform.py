"""Transforms infra/template.yaml with the AWS SAM translator, as CloudFormation's
AWS::Serverless-2016-10-31 transform does at deploy time, and prints the result as JSON.

argv[1]: the template path; argv[2]: JSON of parameter values (as a deploy passes them).
Local CodeUris become fake S3 URIs (the translator accepts no local path), the way cfn-lint
does it; the managed policy ARNs come from cfn-lint's copy of the SAM CLI's list, so no AWS
call is made. test/support/sam.ts runs this and evaluates the result's intrinsics.
"""
import json
import os
import sys

from cfnlint.data import Serverless
from cfnlint.decode import cfn_yaml
from cfnlint.helpers import load_resource
from samtranslator.parser import parser
from samtranslator.translator.translator import Translator


def main() -> None:
    template = cfn_yaml.load(sys.argv[1])
    parameters = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
    for resource in template.get("Resources", {}).values():
        props = resource.get("Properties") or {}
        if resource.get("Type") == "AWS::Serverless::Function" and isinstance(props.get("CodeUri"), str):
            props["CodeUri"] = "s3://lockstep-build/" + props["CodeUri"].replace("../", "")
    os.environ.setdefault("AWS_DEFAULT_REGION", "eu-west-1")
    translator = Translator(managed_policy_map=load_resource(Serverless, "ManagedPolicies.json"), sam_parser=parser.Parser())
    out = translator.translate(sam_template=json.loads(json.dumps(template)), parameter_values=parameters)
    json.dump(out, sys.stdout)


main()
