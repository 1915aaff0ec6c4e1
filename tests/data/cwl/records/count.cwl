cwlVersion: v1.2
class: CommandLineTool
requirements:
  SchemaDefRequirement:
    types:
      - $import: sample.yml
baseCommand: [grep, -c, -H, -e, A]
inputs:
  s: {type: "sample.yml#Sample", inputBinding: {position: 1}}
stdout: counted.txt
successCodes: [0, 1]
outputs:
  out: stdout
