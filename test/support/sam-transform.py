"""Transforms infra/template.yaml with the AWS SAM translator, as CloudFormation's
AWS::Serverless-2016-10-31 transform does at deploy time, once per set of parameter values, and
prints the results as a JSON array.

argv[1]: the template path; stdin: a JSON array of parameter-value objects (as deploys pass them).
Local CodeUris become fake S3 URIs (the translator accepts no local path), the way cfn-lint does
it; the managed policy ARNs come from cfn-lint's copy of the SAM CLI's list, so no AWS call is
made. test/support/sam.ts runs this and evaluates the results' intrinsics.
"""
import copy
import json
import os
import sys

from cfnlint.data import Serverless
from cfnlint.decode import cfn_yaml
from cfnlint.helpers import load_resource
from samtranslator.parser import parser
from samtranslator.translator.translator import Translator


def main() -> None:
    os.environ.setdefault("AWS_DEFAULT_REGION", "eu-west-1")
    template = json.loads(json.dumps(cfn_yaml.load(sys.argv[1])))
    for resource in template.get("Resources", {}).values():
        props = resource.get("Properties") or {}
        if resource.get("Type") == "AWS::Serverless::Function" and isinstance(props.get("CodeUri"), str):
            props["CodeUri"] = "s3://lockstep-build/" + props["CodeUri"].replace("../", "")
    policies = load_resource(Serverless, "ManagedPolicies.json")
    out = []
    for parameters in json.load(sys.stdin):
        translator = Translator(managed_policy_map=policies, sam_parser=parser.Parser())
        out.append(translator.translate(sam_template=copy.deepcopy(template), parameter_values=parameters))
    json.dump(out, sys.stdout)


main()
