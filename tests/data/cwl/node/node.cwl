cwlVersion: v1.2
class: Workflow
doc: >
  A step that runs node among steps whose JavaScript expressions cwltool evaluates
  with node itself (its expression engine), and an ExpressionTool, which runs no command.
requirements:
  InlineJavascriptRequirement: {}
  StepInputExpressionRequirement: {}
inputs:
  word: string
outputs:
  out:
    type: File
    outputSource: shout/out
steps:
  greet:
    run: greet.cwl
    in:
      word:
        source: word
        valueFrom: $(self.split("").reverse().join(""))
    out: [greeting]
  measure:
    run:
      class: ExpressionTool
      inputs:
        f:
          type: File
          loadContents: true
      outputs:
        size: int
      expression: '${ return {"size": inputs.f.contents.length}; }'
    in:
      f: greet/greeting
    out: [size]
  shout:
    run:
      class: CommandLineTool
      baseCommand: [tr, a-z, A-Z]
      inputs:
        f: File
        size: int
      stdin: $(inputs.f.path)
      stdout: $("shout-" + inputs.size + ".txt")
      outputs:
        out: stdout
    in:
      f: greet/greeting
      size: measure/size
    out: [out]
