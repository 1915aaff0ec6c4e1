cwlVersion: v1.2
class: Workflow
doc: >
  Three tools of one baseCommand, `bash -c`, whose command lines are expressions of the
  same input: a JavaScript string, a parameter reference inside text, a template literal;
  two tools of `sort` that differ by their inputs' prefixes (flags with defaults), and two
  steps of one `uniq` tool that set different flags.
  cwltool runs them in any order.
requirements:
  InlineJavascriptRequirement: {}
inputs:
  f: File
outputs:
  tallied: {type: File, outputSource: tally/out}
  counted: {type: File, outputSource: count-lines/out}
  shouted: {type: File, outputSource: shout/out}
  by-number: {type: File, outputSource: by-number/out}
  reversed: {type: File, outputSource: reversed/out}
  uniq-counted: {type: File, outputSource: uniq-counted/out}
  uniq-repeated: {type: File, outputSource: uniq-repeated/out}
steps:
  tally:
    run:
      class: CommandLineTool
      baseCommand: [bash, -c]
      arguments:
        - valueFrom: $("sort " + inputs.f.path + " | uniq -c")
      inputs:
        f: File
      stdout: tally.txt
      outputs:
        out: stdout
    in: {f: f}
    out: [out]
  count-lines:
    run:
      class: CommandLineTool
      baseCommand: [bash, -c]
      arguments: ["wc -l $(inputs.f.path)"]
      inputs:
        f: File
      stdout: lines.txt
      outputs:
        out: stdout
    in: {f: f}
    out: [out]
  shout:
    run:
      class: CommandLineTool
      baseCommand: [bash, -c]
      arguments:
        - valueFrom: '${ return `cat ${inputs.f.path} | tr a-z A-Z`; }'
      inputs:
        f: File
      stdout: shout.txt
      outputs:
        out: stdout
    in: {f: f}
    out: [out]
  by-number:
    run:
      class: CommandLineTool
      baseCommand: sort
      inputs:
        numeric: {type: boolean, default: true, inputBinding: {prefix: -n}}
        f: {type: File, inputBinding: {position: 1}}
      stdout: by-number.txt
      outputs:
        out: stdout
    in: {f: f}
    out: [out]
  reversed:
    run:
      class: CommandLineTool
      baseCommand: sort
      inputs:
        key: {type: int, default: 1, inputBinding: {prefix: -k}}
        reverse: {type: boolean, default: true, inputBinding: {prefix: -r}}
        f: {type: File, inputBinding: {position: 1}}
      stdout: reversed.txt
      outputs:
        out: stdout
    in: {f: f}
    out: [out]
  uniq-counted:
    run: uniq.cwl
    in: {f: f, count: {default: true}}
    out: [out]
  uniq-repeated:
    run: uniq.cwl
    in: {f: f, repeated: {default: true}}
    out: [out]
